package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/sim"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// pvansBinary builds the real binary once per test run.
func pvansBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pvans-e2e")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "pvans")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// freePorts returns a TCP port and a UDP port free on 127.0.0.1 now.
func freePorts(t *testing.T) (tcp, udp, http int) {
	t.Helper()
	l1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Close()
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	for {
		u, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero})
		if err != nil {
			t.Fatal(err)
		}
		p := u.LocalAddr().(*net.UDPAddr).Port
		u.Close()
		if p != 5076 {
			return l1.Addr().(*net.TCPAddr).Port, p, l2.Addr().(*net.TCPAddr).Port
		}
	}
}

type proc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    strings.Builder
	waitCh chan error
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(pvansBinary(t), args...), waitCh: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), "EPICS_PVA_AUTO_ADDR_LIST=NO", "EPICS_PVA_ADDR_LIST=", "EPICS_PVAS_AUTO_BEACON_ADDR_LIST=NO")
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(pr)
		for s.Scan() {
			p.mu.Lock()
			p.out.WriteString(s.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	go func() { err := p.cmd.Wait(); pw.Close(); p.waitCh <- err }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("pvans output:\n%s", p.output())
		}
	})
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *proc) waitExit(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case err := <-p.waitCh:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(d):
		t.Fatalf("pvans did not exit within %s", d)
		return -1
	}
}

func waitFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func httpGet(url string) (int, string) {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDaemonEndToEnd runs the built binary with configs/local.yaml (ports
// moved to free ones by flags) next to a simulated site, then exercises
// the API, metrics, a TCP query, SIGHUP (good and bad file) and SIGTERM,
// and checks the snapshot is written and answers at the next start.
func TestDaemonEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	tcpPort, udpPort, httpPort := freePorts(t)
	dir := t.TempDir()
	snap := filepath.Join(dir, "registry.snapshot")
	cfgFile := filepath.Join(dir, "pvans.yaml")
	orig, err := os.ReadFile("../../configs/local.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	api := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	args := []string{"run", "--config", cfgFile,
		"--server-port", fmt.Sprint(tcpPort), "--broadcast-port", fmt.Sprint(udpPort),
		"--addr-list", fmt.Sprintf("127.0.0.1:%d", udpPort), "--http-listen", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--snapshot-path", snap, "--log-format", "json"}
	p := start(t, args...)
	waitFor(t, 10*time.Second, "/readyz", func() bool { c, _ := httpGet(api + "/readyz"); return c == 200 })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	site, err := sim.Start(ctx, sim.Options{Servers: 2, NamesPerServer: 20, Host: netip.MustParseAddr("127.0.0.1"),
		BeaconDests: []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(udpPort))}})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	name := site.Server(1).Names[3]
	waitFor(t, 10*time.Second, "40 names registered", func() bool {
		_, b := httpGet(api + "/v1/names?limit=100")
		var ns []map[string]any
		return json.Unmarshal([]byte(b), &ns) == nil && len(ns) == 40
	})

	// Every API endpoint.
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/healthz", 200, "ok"},
		{"/readyz", 200, "ready"},
		{"/v1/servers", 200, site.Server(0).GUID.String()},
		{"/v1/servers/" + site.Server(1).GUID.String(), 200, site.Server(1).TCP.String()},
		{"/v1/servers/000000000000000000000000", 404, "no server"},
		{"/v1/names?match=" + name, 200, name},
		{"/v1/names/" + name, 200, site.Server(1).GUID.String()},
		{"/v1/names/no:such:pv", 404, "no live server"},
		{"/v1/duplicates", 200, "[]"},
		{"/v1/events", 200, "listed"},
		{"/", 200, "pvans"},
		{"/metrics", 200, "pvans_registry_names 40"},
	} {
		code, body := httpGet(api + c.path)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("GET %s = %d, want %d containing %q; body: %.300s", c.path, code, c.code, c.want, body)
		}
	}
	resp, err := http.Post(api+"/v1/discover", "", nil)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/discover: %v %v", err, resp)
	}
	resp.Body.Close()

	// A TCP search through the daemon names the real server.
	c, err := nsclient.Dial(ctx, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(tcpPort)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Search([]string{name}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	answers, unresolved, err := c.Wait(wctx)
	wcancel()
	c.Close()
	if err != nil || len(unresolved) != 0 || len(answers) != 1 || answers[0].Endpoint != site.Server(1).TCP || answers[0].GUID != site.Server(1).GUID {
		t.Fatalf("query: %+v unresolved %v err %v", answers, unresolved, err)
	}

	// SIGHUP with a bad file keeps the last good configuration; a good one is taken.
	if err := os.WriteFile(cfgFile, []byte("pva:\n  server_port: 99999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 5*time.Second, "reload refusal logged", func() bool {
		return strings.Contains(p.output(), "keeping the last good configuration")
	})
	if code, _ := httpGet(api + "/healthz"); code != 200 {
		t.Fatal("daemon unhealthy after a refused reload")
	}
	if err := os.WriteFile(cfgFile, append(orig, []byte("\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 5*time.Second, "reload logged", func() bool { return strings.Contains(p.output(), `"configuration reloaded`) })

	// SIGTERM: graceful stop, snapshot written.
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.waitExit(t, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if st, err := os.Stat(snap); err != nil || st.Size() == 0 {
		t.Fatalf("snapshot not written: %v", err)
	}

	// Next start: the snapshot answers at once (unverified), before any beacon.
	guid0 := site.Server(0).GUID.String()
	site.Close()
	p2 := start(t, args...)
	waitFor(t, 10*time.Second, "/healthz after restart", func() bool { c, _ := httpGet(api + "/healthz"); return c == 200 })
	code, body := httpGet(api + "/v1/servers")
	if code != 200 || !strings.Contains(body, `"verified": false`) || !strings.Contains(body, guid0) {
		t.Fatalf("servers after restart: %d %s", code, body)
	}
	if !strings.Contains(p2.output(), "snapshot loaded") {
		t.Fatalf("no snapshot load logged")
	}
	_ = p2.cmd.Process.Signal(syscall.SIGTERM)
	if code := p2.waitExit(t, 20*time.Second); code != 0 {
		t.Fatalf("second exit code %d", code)
	}
}

// TestDemo runs `pvans demo` end to end: it starts, fills the registry,
// resolves a query, and exits 0 on interrupt.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	tcpPort, udpPort, httpPort := freePorts(t)
	p := start(t, "demo", "--servers", "2", "--names", "50", "--server-port", fmt.Sprint(tcpPort),
		"--broadcast-port", fmt.Sprint(udpPort), "--http-listen", fmt.Sprintf("127.0.0.1:%d", httpPort), "--log-level", "warn")
	waitFor(t, 30*time.Second, "demo ready banner", func() bool { return strings.Contains(p.output(), "Press Ctrl-C to stop") })
	if !strings.Contains(p.output(), "learned 2 servers and 100 names") {
		t.Fatalf("banner: %s", p.output())
	}
	out, err := exec.Command(pvansBinary(t), "query", "--server", fmt.Sprintf("127.0.0.1:%d", tcpPort), "sim:s1:pv7").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sim:s1:pv7") {
		t.Fatalf("query: %v\n%s", err, out)
	}
	out, err = exec.Command(pvansBinary(t), "list", "--api", fmt.Sprintf("http://127.0.0.1:%d", httpPort), "--names", "sim:s0:*", "--limit", "5").CombinedOutput()
	if err != nil || strings.Count(string(out), "sim:s0:") != 5 {
		t.Fatalf("list: %v\n%s", err, out)
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.waitExit(t, 20*time.Second); code != 0 {
		t.Fatalf("demo exit code %d", code)
	}
}

// TestCheckConfigAndVersion covers the small subcommands in process.
func TestCheckConfigAndVersion(t *testing.T) {
	var out, errb strings.Builder
	if code := run([]string{"--version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "pvans ") {
		t.Fatalf("--version: %d %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"check-config", "--config", "../../configs/local.yaml"}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "file ../../configs/local.yaml") || !strings.Contains(out.String(), "configuration OK") {
		t.Fatalf("check-config: %d %s %s", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"check-config", "--server-port", "70000"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "70000") {
		t.Fatalf("bad port: %d %q", code, errb.String())
	}
	if code := run([]string{"frobnicate"}, &out, &errb); code != 2 {
		t.Fatalf("unknown command: %d", code)
	}
}
