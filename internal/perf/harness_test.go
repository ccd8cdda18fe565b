package perf

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
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// requirePerf skips the test unless PVANS_PERF=1.
func requirePerf(t *testing.T) {
	t.Helper()
	if os.Getenv("PVANS_PERF") != "1" {
		t.Skip("performance harness: set PVANS_PERF=1 to run")
	}
}

// envInt reads a positive integer setting, or def.
func envInt(t *testing.T, key string, def int) int {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", key, v)
	}
	return n
}

func envDur(t *testing.T, key string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		t.Fatalf("%s=%q: want a duration", key, v)
	}
	return d
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// pvansBinary returns PVANS_BIN, or builds cmd/pvans once per test binary.
func pvansBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PVANS_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pvans-perf-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "pvans")
		goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goCmd); err != nil {
			goCmd = "go"
		}
		out, err := exec.Command(goCmd, "build", "-o", binPath, "github.com/pvans-project/pvans/cmd/pvans").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build cmd/pvans: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// freePort returns a port free for both TCP and UDP on 127.0.0.1.
func freePort(t *testing.T) uint16 {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p})
		ln.Close()
		if err == nil {
			uc.Close()
			return uint16(p)
		}
	}
	t.Fatal("no free port")
	return 0
}

var loopback = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// pvans is one daemon process under test.
type pvans struct {
	t       *testing.T
	cmd     *exec.Cmd
	done    chan struct{}
	UDP     netip.AddrPort // search/beacon port
	TCP     netip.AddrPort // name-server port
	HTTP    string         // base URL
	Started time.Time      // just before exec
	logPath string
}

// startPVANS runs the daemon on loopback with fresh ports, no snapshot,
// rate limits off (the load tool is one source), plus extra flags. With
// PERF_SERVER_CPU set, it is pinned to that CPU with taskset.
func startPVANS(t *testing.T, extra ...string) *pvans {
	t.Helper()
	return startPVANSOn(t, 0, extra...)
}

// startPVANSOn is startPVANS with a given search/beacon port (0: a free
// one), so a restarted daemon hears the same beacons.
func startPVANSOn(t *testing.T, udp uint16, extra ...string) *pvans {
	t.Helper()
	bin := pvansBinary(t)
	if udp == 0 {
		udp = freePort(t)
	}
	tcp, hp := freePort(t), freePort(t)
	p := &pvans{t: t, done: make(chan struct{}),
		UDP: netip.AddrPortFrom(loopback, udp), TCP: netip.AddrPortFrom(loopback, tcp),
		HTTP: fmt.Sprintf("http://127.0.0.1:%d", hp), logPath: filepath.Join(t.TempDir(), "pvans.log")}
	args := []string{"run",
		"-interfaces", "127.0.0.1", "-auto-addr-list=false", "-auto-beacon-addr-list=false",
		"-beacon-addr-list", "127.0.0.1",
		"-broadcast-port", strconv.Itoa(int(udp)), "-server-port", strconv.Itoa(int(tcp)),
		"-http-listen", fmt.Sprintf("127.0.0.1:%d", hp), "-snapshot-path=",
		"-rate-limit-udp-searches-per-second", "0", "-rate-limit-tcp-messages-per-second", "0",
		"-log-level", "warn", "-log-format", "json",
	}
	if !slices.Contains(extra, "-addr-list") {
		// Discovery pings go to our own port only (nothing answers there).
		args = append(args, "-addr-list", fmt.Sprintf("127.0.0.1:%d", udp))
	}
	args = append(args, extra...)
	name := bin
	if cpu := os.Getenv("PERF_SERVER_CPU"); cpu != "" {
		args = append([]string{"-c", cpu, bin}, args...)
		name = "taskset"
	}
	cmd := exec.Command(name, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EPICS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	logf, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	p.cmd = cmd
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(p.Stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := p.Metrics(); err == nil {
			break
		}
		select {
		case <-p.done:
			t.Fatalf("pvans exited at start:\n%s", p.logTail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pvans /metrics not up in 30 s:\n%s", p.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

// PID is the daemon's process ID (taskset execs it, so the same).
func (p *pvans) PID() int { return p.cmd.Process.Pid }

// Stop ends the daemon with SIGTERM, then SIGKILL after 10 s.
func (p *pvans) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *pvans) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// Metrics scrapes /metrics into name{labels} → value.
func (p *pvans) Metrics() (map[string]float64, error) {
	resp, err := httpClient.Get(p.HTTP + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

func parseMetrics(r io.Reader) (map[string]float64, error) {
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

// Metric is one scraped value (fatal if /metrics fails).
func (p *pvans) Metric(name string) float64 {
	p.t.Helper()
	m, err := p.Metrics()
	if err != nil {
		p.t.Fatal(err)
	}
	return m[name]
}

// waitMetric polls name every poll until cond holds or timeout passes; it
// returns the time cond first held, measured from the poll that saw it.
func (p *pvans) waitMetric(name string, cond func(float64) bool, poll, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for {
		if m, err := p.Metrics(); err == nil && cond(m[name]) {
			return time.Now(), true
		}
		if time.Now().After(deadline) {
			return time.Time{}, false
		}
		time.Sleep(poll)
	}
}

// HasName asks the HTTP API whether a live server holds name.
func (p *pvans) HasName(name string) (bool, error) {
	resp, err := httpClient.Get(p.HTTP + "/v1/names/" + name)
	if err != nil {
		return false, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	}
	return false, fmt.Errorf("/v1/names/%s: %s", name, resp.Status)
}

// rssBytes reads VmRSS of pid.
func rssBytes(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024
		}
	}
	return 0
}

// loadAvg is the 1-minute load average, for the record.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// summary is the percentiles of a set of durations.
type summary struct {
	N                  int
	Min, P50, P99, Max time.Duration
}

func summarize(d []time.Duration) summary {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return summary{}
	}
	pct := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return summary{N: len(s), Min: s[0], P50: pct(0.5), P99: pct(0.99), Max: s[len(s)-1]}
}

func (s summary) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return fmt.Sprintf("n=%d min %v p50 %v p99 %v max %v", s.N, r(s.Min), r(s.P50), r(s.P99), r(s.Max))
}

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

// ctxTimeout is a bounded context for one step.
func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// udpDrops lists the kernel drop count of each UDP socket pid holds, as
// "local-address:port=drops" (from /proc/net/udp): a burst that overflows
// a receive buffer shows here even if the process does not count it.
func udpDrops(pid int) string {
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return "?"
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name())
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return "?"
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 13 || !inodes[f[9]] {
			continue
		}
		port, _ := strconv.ParseUint(f[1][strings.IndexByte(f[1], ':')+1:], 16, 16)
		out = append(out, fmt.Sprintf("port %d: %s drops", port, f[len(f)-1]))
	}
	return strings.Join(out, ", ")
}
