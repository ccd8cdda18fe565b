//go:build linux

package chaos

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvans-project/pvans/internal/nsclient"
)

// Addresses of the test topology; they exist only inside the namespaces.
var (
	clientAddr      = netip.MustParseAddr("10.203.1.1") // client net side
	pvansClientAddr = netip.MustParseAddr("10.203.1.2") // pvans, client net
	pvansServerAddr = netip.MustParseAddr("10.203.2.2") // pvans, server net
	iocA            = netip.MustParseAddr("10.203.2.1") // first simulated IOC host
	iocB            = netip.MustParseAddr("10.203.2.3") // second simulated IOC host
	stormAddr       = netip.MustParseAddr("10.203.2.4") // beacon storm source
)

const (
	pvansTCPPort  = 5075
	pvansUDPPort  = 5076
	pvansHTTPPort = 9076
)

var pvansTCP = netip.AddrPortFrom(pvansClientAddr, pvansTCPPort)

func requireNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chaos tests need root (ip netns add); skipping")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("chaos tests need the ip command (apt-get install iproute2); skipping")
	}
	if testing.Short() {
		t.Skip("chaos tests build and run the daemon in namespaces; skipped with -short")
	}
}

func requireNft(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("this chaos test injects faults with nftables; nft not found (apt-get install nftables); skipping")
	}
}

// staleNetns matches namespaces of this package: kind, creator pid, random.
var staleNetns = regexp.MustCompile(`^pvans-[cps]-(\d+)-[0-9a-f]+$`)

// cleanStaleNetns deletes namespaces left by earlier runs that crashed
// before their cleanup: those whose creating process is gone.
func cleanStaleNetns() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		m := staleNetns.FindStringSubmatch(f[0])
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if pid == os.Getpid() || unix.Kill(pid, 0) == nil {
			continue // a live run owns it
		}
		if pids, err := exec.Command("ip", "netns", "pids", f[0]).Output(); err == nil {
			for _, p := range strings.Fields(string(pids)) {
				if n, err := strconv.Atoi(p); err == nil {
					_ = unix.Kill(n, unix.SIGKILL) // orphans of the crashed run, in its own namespace
				}
			}
		}
		_ = exec.Command("ip", "netns", "del", f[0]).Run()
	}
}

var (
	buildOnce sync.Once
	buildDir  string
	pvansBin  string
	buildErr  error
)

// pvansBinary builds cmd/pvans once per test run.
func pvansBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		goCmd, err := exec.LookPath("go")
		if err != nil {
			goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		if buildDir, buildErr = os.MkdirTemp("", "pvans-chaos"); buildErr != nil {
			return
		}
		pvansBin = filepath.Join(buildDir, "pvans")
		out, err := exec.Command(goCmd, "build", "-o", pvansBin, "../../cmd/pvans").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/pvans: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return pvansBin
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// netns is one namespace made by the test.
type netns struct{ name string }

func newNetns(t *testing.T, kind byte, suffix string) *netns {
	t.Helper()
	n := &netns{name: fmt.Sprintf("pvans-%c-%d-%s", kind, os.Getpid(), suffix)}
	run(t, "ip", "netns", "add", n.name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", n.name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", n.name, err, out)
		}
	})
	n.ip(t, "link set lo up")
	// Loopback multicast: pvans forwards unicast searches to local
	// listeners over 224.0.0.128 on lo, as PVXS does.
	n.ip(t, "link set lo multicast on")
	n.ip(t, "route add 224.0.0.0/4 dev lo")
	return n
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

func (n *netns) ip(t *testing.T, args string) {
	t.Helper()
	run(t, "ip", append([]string{"-n", n.name}, strings.Fields(args)...)...)
}

// nft loads an nftables script inside the namespace.
func (n *netns) nft(t *testing.T, script string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", n.name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v: %s\nscript:\n%s", n.name, err, out, script)
	}
}

// do runs fn on a fresh OS thread switched into the namespace. The thread
// stays locked, so it dies with its goroutine instead of returning to the
// scheduler in the wrong namespace. Sockets fn creates live in the
// namespace and may be used from any goroutine afterwards.
func (n *netns) do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/var/run/netns/"+n.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// topo is the three-namespace test network:
//
//	client net  c: 10.203.1.1 ──veth── 10.203.1.2  p (pvans)  10.203.2.2 ──veth── s: 10.203.2.1, .3, .4  server net
type topo struct {
	c, p, s *netns
	pToS    string // pvans' interface on the server net
	sToP    string // the server net's side of it
	dir     string
	http    *http.Client
}

func newTopo(t *testing.T) *topo {
	t.Helper()
	requireNetns(t)
	pvansBinary(t)
	r := randHex(3)
	tp := &topo{c: newNetns(t, 'c', r), p: newNetns(t, 'p', r), s: newNetns(t, 's', r), dir: t.TempDir()}
	veth := func(a *netns, an string, aAddrs []netip.Addr, b *netns, bn string, bAddrs []netip.Addr) {
		run(t, "ip", "link", "add", an, "netns", a.name, "type", "veth", "peer", "name", bn, "netns", b.name)
		for _, x := range aAddrs {
			a.ip(t, "addr add "+x.String()+"/24 dev "+an)
		}
		for _, x := range bAddrs {
			b.ip(t, "addr add "+x.String()+"/24 dev "+bn)
		}
		a.ip(t, "link set "+an+" up")
		b.ip(t, "link set "+bn+" up")
	}
	tp.pToS, tp.sToP = "pvps"+r, "pvsp"+r
	veth(tp.c, "pvcp"+r, []netip.Addr{clientAddr}, tp.p, "pvpc"+r, []netip.Addr{pvansClientAddr})
	veth(tp.p, tp.pToS, []netip.Addr{pvansServerAddr}, tp.s, tp.sToP, []netip.Addr{iocA, iocB, stormAddr})
	tp.http = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			err = tp.p.do(func() (err error) { c, err = (&net.Dialer{}).DialContext(ctx, network, addr); return })
			return
		},
	}}
	return tp
}

// proc is a process started in a namespace with `ip netns exec` (which
// execs, so the pid is the program's own).
type proc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	done chan struct{}
	line chan string // stdout lines, for start-up handshakes
}

func startIn(t *testing.T, n *netns, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{}), line: make(chan string, 1024)}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", n.name, bin}, args...)...)
	p.cmd.Env = append(os.Environ(), "EPICS_PVA_AUTO_ADDR_LIST=NO", "EPICS_PVA_ADDR_LIST=",
		"EPICS_PVAS_AUTO_BEACON_ADDR_LIST=NO", "EPICS_PVA_NAME_SERVERS=")
	p.cmd.Env = append(p.cmd.Env, env...)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	copyLines := func(r io.Reader, lines bool) {
		defer wg.Done()
		s := bufio.NewScanner(r)
		s.Buffer(make([]byte, 64<<10), 1<<20)
		for s.Scan() {
			p.mu.Lock()
			p.out.WriteString(s.Text() + "\n")
			p.mu.Unlock()
			if lines {
				select {
				case p.line <- s.Text():
				default:
				}
			}
		}
	}
	go copyLines(stdout, true)
	go copyLines(stderr, false)
	go func() { wg.Wait(); _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			out := p.output()
			if len(out) > 8000 {
				out = "…" + out[len(out)-8000:]
			}
			t.Logf("%s output (tail):\n%s", p.name, out)
		}
	})
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// rssKB is the process's resident set size (VmRSS) in KiB.
func (p *proc) rssKB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// pvansArgs are the flags every chaos test gives the daemon: everything
// explicit, no automatic address lists, API on the namespace's loopback.
func pvansArgs(extra ...string) []string {
	return append([]string{"run",
		"--interfaces", "0.0.0.0",
		"--server-port", strconv.Itoa(pvansTCPPort), "--broadcast-port", strconv.Itoa(pvansUDPPort),
		"--auto-addr-list=false", "--auto-beacon-addr-list=false",
		"--http-listen", fmt.Sprintf("127.0.0.1:%d", pvansHTTPPort),
		"--snapshot-path", "", "--log-format", "json",
	}, extra...)
}

// startPvans runs the daemon in the pvans namespace and waits for /readyz.
func (tp *topo) startPvans(t *testing.T, extra ...string) *proc {
	t.Helper()
	p := startIn(t, tp.p, "pvans", nil, pvansBinary(t), pvansArgs(extra...)...)
	waitFor(t, 15*time.Second, "pvans /readyz", func() bool {
		code, _ := tp.get("/readyz")
		return code == 200
	})
	return p
}

// get does an HTTP GET on the pvans API (inside the pvans namespace).
func (tp *topo) get(path string) (int, []byte) {
	resp, err := tp.http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", pvansHTTPPort, path))
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// holder is the GUID the API says answers for name ("" if none).
func (tp *topo) holder(name string) string {
	code, b := tp.get("/v1/names/" + name)
	if code != 200 {
		return ""
	}
	var v struct{ GUID string }
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	return v.GUID
}

type apiServer struct {
	GUID     string `json:"guid"`
	Endpoint string `json:"endpoint"`
	Names    int    `json:"names"`
	Verified bool   `json:"verified"`
}

func (tp *topo) servers(t *testing.T) []apiServer {
	t.Helper()
	code, b := tp.get("/v1/servers")
	if code != 200 {
		t.Fatalf("GET /v1/servers: %d %s", code, b)
	}
	var v []apiServer
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// metric returns one sample of /metrics, e.g.
// `pvans_beacon_events_total{kind="dropped"}`; -1 if absent.
func (tp *topo) metric(t *testing.T, series string) float64 {
	t.Helper()
	code, b := tp.get("/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// query asks pvans over TCP from the client net, on a new connection (an
// nsclient keeps the first answer per name), and waits up to wait.
func (tp *topo) query(names []string, wait time.Duration) (map[string]nsclient.Answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait+5*time.Second)
	defer cancel()
	var cl *nsclient.Client
	if err := tp.c.do(func() (err error) { cl, err = nsclient.Dial(ctx, pvansTCP); return }); err != nil {
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

func waitFor(t *testing.T, d time.Duration, what string, f func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !f() {
		if time.Since(start) > d {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}
