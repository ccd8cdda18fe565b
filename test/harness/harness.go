// Package harness runs the real pvans binary for the tests under test/:
// build it once, start it on free loopback ports or inside a namespace the
// test made, read its HTTP API and /metrics, ask it for names over TCP the
// way a PVXS client does, and stop it. It is the one process harness; the
// chaos, perf and end-to-end tests share it instead of each keeping one.
//
// It owns no daemon behaviour. Everything it starts talks only to the
// addresses the test gives it: automatic address lists are off, and the
// EPICS environment is emptied (testutil.IsolatedEnv).
package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/testutil"
)

// Options say where and how to run one pvans.
type Options struct {
	// Netns runs pvans inside this namespace (nil: on the host's loopback).
	Netns *testutil.Netns
	// Addr is the address the API and the test's clients use (default
	// 127.0.0.1); Interfaces is what pvans binds (default Addr, or 0.0.0.0
	// in a namespace).
	Addr       netip.Addr
	Interfaces string
	// Ports; 0 picks a free one on the host, or the PVA defaults (5075,
	// 5076) and 9076 for HTTP inside a namespace, where nothing else runs.
	TCPPort, UDPPort, HTTPPort uint16
	// Args are extra flags after the harness's own (later flags win).
	Args []string
	// Env is extra environment (KEY=VALUE) after testutil.IsolatedEnv.
	Env []string
	// Ready is how long to wait for /readyz (default 30 s); NoWait
	// returns as soon as the process runs (a test timing the start).
	Ready  time.Duration
	NoWait bool
	// Command wraps the binary, e.g. {"taskset", "-c", "1"} (nil: none).
	Command []string
	// Bin is the pvans binary (default Binary: PVANS_BIN or a fresh
	// build), e.g. an older build measured side by side.
	Bin string
	// Subcommand is the daemon's subcommand (default "run"; "relay" runs
	// the relay profile).
	Subcommand string
}

// Pvans is one daemon process under test.
type Pvans struct {
	*testutil.Proc
	Netns *testutil.Netns
	TCP   netip.AddrPort // name-server endpoint
	UDP   netip.AddrPort // search and beacon port
	HTTP  string         // API base URL
	http  *http.Client
}

// Start builds pvans (once per test binary), runs it as Options say and
// waits until /readyz answers 200. The process is killed when the test
// ends; Stop ends it earlier with SIGTERM.
func Start(t testing.TB, o Options) *Pvans {
	t.Helper()
	bin := o.Bin
	if bin == "" {
		bin = Binary(t)
	}
	if !o.Addr.IsValid() {
		o.Addr = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	if o.Interfaces == "" {
		o.Interfaces = o.Addr.String()
		if o.Netns != nil {
			o.Interfaces = "0.0.0.0"
		}
	}
	pick := func(p, inNetns uint16) uint16 {
		switch {
		case p != 0:
			return p
		case o.Netns != nil:
			return inNetns
		default:
			return FreePort(t)
		}
	}
	o.TCPPort, o.UDPPort, o.HTTPPort = pick(o.TCPPort, 5075), pick(o.UDPPort, 5076), pick(o.HTTPPort, 9076)
	p := &Pvans{Netns: o.Netns,
		TCP:  netip.AddrPortFrom(o.Addr, o.TCPPort),
		UDP:  netip.AddrPortFrom(o.Addr, o.UDPPort),
		HTTP: "http://" + netip.AddrPortFrom(o.Addr, o.HTTPPort).String(),
		http: httpClient(o.Netns),
	}
	if o.Subcommand == "" {
		o.Subcommand = "run"
	}
	args := append([]string{o.Subcommand,
		"--interfaces", o.Interfaces,
		"--server-port", strconv.Itoa(int(o.TCPPort)), "--broadcast-port", strconv.Itoa(int(o.UDPPort)),
		"--auto-addr-list=false", "--auto-beacon-addr-list=false",
		"--http-listen", netip.AddrPortFrom(o.Addr, o.HTTPPort).String(),
		"--snapshot-path", "", "--log-format", "json",
	}, o.Args...)
	argv := append(append(append([]string(nil), o.Command...), bin), args...)
	var cmd *exec.Cmd
	if o.Netns != nil {
		cmd = o.Netns.Command(argv[0], argv[1:]...)
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
	}
	cmd.Env = testutil.IsolatedEnv(o.Env...)
	p.Proc = testutil.StartProc(t, "pvans", cmd)
	if o.NoWait {
		return p
	}
	wait := o.Ready
	if wait == 0 {
		wait = 30 * time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		if code, _, err := p.Get("/readyz"); err == nil && code == http.StatusOK {
			return p
		}
		select {
		case <-p.Done():
			t.Fatalf("pvans exited at start")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pvans /readyz not 200 within %s", wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Binary is PVANS_BIN if set, else cmd/pvans built once per test binary.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("PVANS_BIN"); p != "" {
		return p
	}
	return testutil.PvansBinary(t)
}

// httpClient reaches the API from the test process; in a namespace each
// dial runs on a thread switched into it.
func httpClient(n *testutil.Netns) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	if n != nil {
		tr.DialContext = func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			err = n.Do(func() (err error) { c, err = (&net.Dialer{}).DialContext(ctx, network, addr); return })
			return
		}
	}
	// A hang guard: at load 30, GET /v1/servers of 20,000 rows took over
	// 5 s (TestBeaconStorm).
	return &http.Client{Timeout: 60 * time.Second, Transport: tr}
}

// Stop ends the daemon with SIGTERM (a clean shutdown), then SIGKILL
// after 10 s.
func (p *Pvans) Stop() {
	select {
	case <-p.Done():
		return
	default:
	}
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		p.Kill()
	}
}

// Get does one HTTP GET on the API.
func (p *Pvans) Get(path string) (int, []byte, error) {
	resp, err := p.http.Get(p.HTTP + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Metrics scrapes /metrics into series (name{labels}) → value.
func (p *Pvans) Metrics() (map[string]float64, error) {
	code, b, err := p.Get("/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/metrics: HTTP %d", code)
	}
	return ParseMetrics(strings.NewReader(string(b)))
}

// Metric is one scraped series, e.g. `pvans_beacon_events_total{kind="dropped"}`;
// -1 if absent. A failed scrape fails the test.
func (p *Pvans) Metric(t testing.TB, series string) float64 {
	t.Helper()
	m, err := p.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := m[series]; ok {
		return v
	}
	return -1
}

// WaitMetric polls series every poll until cond holds or timeout passes;
// it returns when cond first held (as seen by the poll) and whether it did.
func (p *Pvans) WaitMetric(series string, cond func(float64) bool, poll, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for {
		if m, err := p.Metrics(); err == nil && cond(m[series]) {
			return time.Now(), true
		}
		if time.Now().After(deadline) {
			return time.Time{}, false
		}
		time.Sleep(poll)
	}
}

// HasName asks the API whether a live server holds name.
func (p *Pvans) HasName(name string) (bool, error) {
	code, _, err := p.Get("/v1/names/" + name)
	if err != nil {
		return false, err
	}
	switch code {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	}
	return false, fmt.Errorf("/v1/names/%s: HTTP %d", name, code)
}

// Query asks pvans over TCP, on a new connection from the namespace in
// from (nil: the test's own), for names and collects the answers that
// arrive within wait, pushed ones included. A name with no answer is
// absent from the map.
func Query(from *testutil.Netns, server netip.AddrPort, names []string, wait time.Duration) (map[string]nsclient.Answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait+5*time.Second)
	defer cancel()
	var cl *nsclient.Client
	dial := func() (err error) { cl, err = nsclient.Dial(ctx, server); return }
	var err error
	if from != nil {
		err = from.Do(dial)
	} else {
		err = dial()
	}
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := cl.Search(names); err != nil {
		return nil, err
	}
	wctx, wcancel := context.WithTimeout(ctx, wait)
	defer wcancel()
	ans, _, err := cl.Wait(wctx)
	m := make(map[string]nsclient.Answer, len(ans))
	for _, a := range ans {
		m[a.Name] = a
	}
	return m, err
}

// Query asks this pvans (from its own namespace, or the host).
func (p *Pvans) Query(names []string, wait time.Duration) (map[string]nsclient.Answer, error) {
	return Query(p.Netns, p.TCP, names, wait)
}

// ParseMetrics reads the Prometheus text format into series → value.
func ParseMetrics(r io.Reader) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// FreePort is a port free for both TCP and UDP on 127.0.0.1 (pvans binds
// both on its ports), never 5075 or 5076.
func FreePort(t testing.TB) uint16 {
	t.Helper()
	for range 50 {
		p := testutil.FreeTCPPort(t)
		uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(p)})
		if err == nil {
			uc.Close()
			return p
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return 0
}

// RSS is the process's resident set size in bytes (0 if unknown).
func RSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// UDPAnswer is one CMD_SEARCH_RESPONSE received by UDPSearch.
type UDPAnswer struct {
	From     netip.AddrPort // the datagram's source: where the answer came from
	GUID     pva.GUID
	Endpoint netip.AddrPort // address and port named in the answer (not substituted)
	Found    bool
	CIDs     []uint32
}

// UDPSearch sends one UDP search for names (CIDs 1, 2, …; none: a
// discovery ping with MustReply) from the namespace in from (nil: the
// test's own) to the search port at to, from a socket of to's family, and
// collects the answers that arrive within wait, resending once a second
// until the first one comes.
func UDPSearch(from *testutil.Netns, to netip.AddrPort, names []string, wait time.Duration) ([]UDPAnswer, error) {
	network := "udp4"
	if !to.Addr().Is4() {
		network = "udp6"
	}
	var c *net.UDPConn
	open := func() (err error) {
		var pc net.PacketConn
		pc, err = net.ListenPacket(network, ":0")
		if err == nil {
			c = pc.(*net.UDPConn)
		}
		return err
	}
	var err error
	if from != nil {
		err = from.Do(open)
	} else {
		err = open()
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	p := pva.NewSearchPacker(uint16(c.LocalAddr().(*net.UDPAddr).Port))
	p.Flags = pva.SearchUnicast
	q := make([]pva.SearchName, len(names))
	for i, n := range names {
		q[i] = pva.SearchName{CID: uint32(i + 1), Name: []byte(n)}
	}
	var dgs [][]byte
	if len(q) == 0 {
		s := pva.Search{Seq: pva.SearchSeqFind, Flags: pva.SearchMustReply | pva.SearchUnicast, ReplyPort: p.ReplyPort}
		dgs = append(dgs, pva.AppendSearch(nil, pva.FlagBigEndian, &s))
	} else if err := p.Pack(q, func(b []byte) { dgs = append(dgs, append([]byte(nil), b...)) }); err != nil {
		return nil, err
	}
	var out []UDPAnswer
	buf := make([]byte, 65536)
	deadline := time.Now().Add(wait)
	nextSend := time.Time{}
	for time.Now().Before(deadline) {
		if len(out) == 0 && time.Now().After(nextSend) {
			for _, dg := range dgs {
				if _, err := c.WriteToUDPAddrPort(dg, to); err != nil {
					return nil, err
				}
			}
			nextSend = time.Now().Add(time.Second)
		}
		rd := min(time.Until(deadline), 200*time.Millisecond)
		_ = c.SetReadDeadline(time.Now().Add(rd))
		n, src, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			continue
		}
		h, payload, _, err := pva.SplitMessage(buf[:n])
		if err != nil || h.Command != pva.CmdSearchResponse {
			continue
		}
		var m pva.SearchResponse
		if err := m.Decode(payload, h.BigEndian()); err != nil {
			return out, fmt.Errorf("undecodable answer from %s: %w", src, err)
		}
		out = append(out, UDPAnswer{From: netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), GUID: m.GUID,
			Endpoint: netip.AddrPortFrom(m.Addr.Addr(), m.Port), Found: m.Found, CIDs: append([]uint32(nil), m.CIDs...)})
		if len(names) > 0 && answeredAll(out, len(names)) {
			break
		}
	}
	return out, nil
}

func answeredAll(out []UDPAnswer, n int) bool {
	seen := map[uint32]bool{}
	for _, a := range out {
		if a.Found {
			for _, c := range a.CIDs {
				seen[c] = true
			}
		}
	}
	return len(seen) >= n
}
