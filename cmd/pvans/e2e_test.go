package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/buildinfo"
	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBuilds() // what testutil.PvansBinary built
	os.Exit(code)
}

// freePorts returns a TCP port and a UDP port free on 127.0.0.1 now, and
// a second TCP port for the HTTP API.
func freePorts(t *testing.T) (tcp, udp, http int) {
	t.Helper()
	p := testutil.FreeTCPPorts(t, 2)
	return int(p[0]), int(testutil.FreeUDPPort(t)), int(p[1])
}

// start runs the built binary with the EPICS address lists off.
func start(t *testing.T, args ...string) *testutil.Proc {
	t.Helper()
	cmd := exec.Command(testutil.PvansBinary(t), args...)
	cmd.Env = testutil.IsolatedEnv()
	return testutil.StartProc(t, "pvans", cmd)
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
	testutil.WaitFor(t, 10*time.Second, "/readyz", func() bool { c, _ := httpGet(api + "/readyz"); return c == 200 })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	site, err := sim.Start(ctx, sim.Options{Servers: 2, NamesPerServer: 20, Host: netip.MustParseAddr("127.0.0.1"),
		BeaconDests: []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(udpPort))}})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	name := site.Server(1).Names[3]
	testutil.WaitFor(t, 10*time.Second, "40 names registered", func() bool {
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
	resp, err := http.Post(api+"/v1/discover", "application/json", strings.NewReader("{}"))
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
	_ = p.Signal(syscall.SIGHUP)
	testutil.WaitFor(t, 5*time.Second, "reload refusal logged", func() bool {
		return strings.Contains(p.Output(), "keeping the last good configuration")
	})
	if code, _ := httpGet(api + "/healthz"); code != 200 {
		t.Fatal("daemon unhealthy after a refused reload")
	}
	if err := os.WriteFile(cfgFile, append(orig, []byte("\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = p.Signal(syscall.SIGHUP)
	testutil.WaitFor(t, 5*time.Second, "reload logged", func() bool { return strings.Contains(p.Output(), `"configuration reloaded`) })

	// SIGTERM: graceful stop, snapshot written.
	_ = p.Signal(syscall.SIGTERM)
	if code := p.WaitExit(t, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if st, err := os.Stat(snap); err != nil || st.Size() == 0 {
		t.Fatalf("snapshot not written: %v", err)
	}

	// Next start: the snapshot answers at once (unverified), before any
	// beacon, while the servers are there but answer nothing (hung): a
	// server whose endpoint refuses the connection would be dropped at
	// once (TestSnapshotServerGoneWhenEndpointRefuses).
	guid0 := site.Server(0).GUID.String()
	for i := range site.Len() {
		if err := site.Kill(i); err != nil {
			t.Fatal(err)
		}
	}
	defer site.Close()
	p2 := start(t, args...)
	testutil.WaitFor(t, 10*time.Second, "/healthz after restart", func() bool { c, _ := httpGet(api + "/healthz"); return c == 200 })
	code, body := httpGet(api + "/v1/servers")
	if code != 200 || !strings.Contains(body, `"verified": false`) || !strings.Contains(body, guid0) {
		t.Fatalf("servers after restart: %d %s", code, body)
	}
	if !strings.Contains(p2.Output(), "snapshot loaded") {
		t.Fatalf("no snapshot load logged")
	}
	_ = p2.Signal(syscall.SIGTERM)
	if code := p2.WaitExit(t, 20*time.Second); code != 0 {
		t.Fatalf("second exit code %d", code)
	}
}

// TestDemo runs `pvans demo` end to end: it starts, fills the registry,
// resolves a query, runs a scripted site command and tells what pvans did
// about it, and exits 0 on interrupt.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	tcpPort, udpPort, httpPort := freePorts(t)
	p := start(t, "demo", "--servers", "2", "--names", "50", "--server-port", fmt.Sprint(tcpPort),
		"--broadcast-port", fmt.Sprint(udpPort), "--http-listen", fmt.Sprintf("127.0.0.1:%d", httpPort), "--log-level", "warn",
		"--do", "1s restart 1", "--do", "1s bogus")
	testutil.WaitFor(t, 30*time.Second, "demo ready banner", func() bool { return strings.Contains(p.Output(), "Press Ctrl-C to stop") })
	if !strings.Contains(p.Output(), "learned 2 servers and 100 names") {
		t.Fatalf("banner: %s", p.Output())
	}
	out, err := exec.Command(testutil.PvansBinary(t), "query", "--server", fmt.Sprintf("127.0.0.1:%d", tcpPort), "sim:s1:pv7").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sim:s1:pv7") {
		t.Fatalf("query: %v\n%s", err, out)
	}
	out, err = exec.Command(testutil.PvansBinary(t), "list", "--api", fmt.Sprintf("http://127.0.0.1:%d", httpPort), "--names", "sim:s0:*", "--limit", "5").CombinedOutput()
	if err != nil || strings.Count(string(out), "sim:s0:") != 5 {
		t.Fatalf("list: %v\n%s", err, out)
	}
	testutil.WaitFor(t, 20*time.Second, "pvans re-lists the restarted server", func() bool {
		return strings.Contains(p.Output(), "pvans: server 1 re-listed 50 names in ")
	})
	for _, want := range []string{"sim: server 1 restarted: GUID ", "pvans: server 1 restarted: new GUID ", `sim: "bogus": unknown command`} {
		if !strings.Contains(p.Output(), want) {
			t.Errorf("no %q in the demo's output:\n%s", want, p.Output())
		}
	}
	_ = p.Signal(syscall.SIGINT)
	if code := p.WaitExit(t, 20*time.Second); code != 0 {
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
	// Each setting says whether a reload applies it.
	marked := 0
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "pva.server_port", "snapshot.path", "http.listen":
			marked++
			if !strings.HasSuffix(l, "needs restart") {
				t.Errorf("check-config does not mark %s as needing a restart: %q", f[0], l)
			}
		case "access.tcp_client_deny", "static.servers", "log.format":
			marked++
			if !strings.HasSuffix(l, "applied") {
				t.Errorf("check-config does not mark %s as applied on reload: %q", f[0], l)
			}
		}
	}
	if marked != 6 {
		t.Errorf("check-config listed %d of the 6 settings checked:\n%s", marked, out.String())
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

// TestDemoTypedCommands runs the demo in process with commands typed on
// its standard input: help, a stop the narrator reports from pvans'
// events, and quit.
func TestDemoTypedCommands(t *testing.T) {
	tcpPort, udpPort, httpPort := freePorts(t)
	in, typed := io.Pipe()
	var out, errb testutil.Buffer
	code := make(chan int, 1)
	go func() {
		code <- demo([]string{"--servers", "2", "--names", "5", "--server-port", fmt.Sprint(tcpPort), "--broadcast-port", fmt.Sprint(udpPort),
			"--http-listen", fmt.Sprintf("127.0.0.1:%d", httpPort), "--log-level", "info"}, in, &out, &errb, nil)
	}()
	testutil.WaitFor(t, 30*time.Second, "demo ready", func() bool { return strings.Contains(out.String(), "Press Ctrl-C to stop") })
	if strings.Contains(errb.String(), "sim: sim:") || !strings.Contains(errb.String(), "sim: server 0 up") {
		t.Errorf("the simulator's log lines should say \"sim: \" once:\n%s", errb.String())
	}
	fmt.Fprintln(typed, "help")
	fmt.Fprintln(typed, "stop 0")
	testutil.WaitFor(t, 10*time.Second, "pvans reports the stopped server lost", func() bool {
		return strings.Contains(out.String(), "pvans: server 0 (GUID ")
	})
	if !strings.Contains(out.String(), "sim:   restart N") || !strings.Contains(out.String(), "sim: server 0 stopped") {
		t.Fatalf("output:\n%s", out.String())
	}
	if regexp.MustCompile(`-[0-9]+ ms after`).MatchString(out.String()) {
		t.Errorf("an effect reported before its command:\n%s", out.String())
	}
	fmt.Fprintln(typed, "quit")
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d: %s", c, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("quit did not stop the demo")
	}
}

// TestVersionFlags: `pvans version`, --version, -V and -v (alone, or after
// run) print the version, commit, date and Go version and start nothing; a
// mistaken flag says what was wrong in a few lines, not the whole flag list.
func TestVersionFlags(t *testing.T) {
	b := buildinfo.Read()
	want := fmt.Sprintf("pvans %s\ncommit %s\ndate   %s\ngo     %s\n", b.Version, b.Commit, b.Date, b.GoVersion)
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}, {"-V"}, {"-v"}, {"run", "-V"}, {"run", "--version"},
		{"run", "-v", "--config", "/nonexistent.yaml"}, {"check-config", "-V"}} {
		var out, errb strings.Builder
		if code := run(args, &out, &errb); code != 0 || out.String() != want || errb.Len() != 0 {
			t.Errorf("pvans %s: exit %d, stdout %q, stderr %q; want exit 0 and %q", strings.Join(args, " "), code, out.String(), errb.String(), want)
		}
	}
	var out, errb strings.Builder
	code := run([]string{"--bogus"}, &out, &errb)
	if lines := strings.Count(errb.String(), "\n"); code != 2 || lines > 2 || !strings.Contains(errb.String(), "-bogus") ||
		strings.Contains(errb.String(), "configuration refused") || out.Len() != 0 {
		t.Errorf("pvans --bogus: exit %d, %d lines on stderr:\n%s", code, lines, errb.String())
	}
	errb.Reset()
	if code := run([]string{"run", "-h"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "-server-port") {
		t.Errorf("pvans run -h: exit %d, no flag list:\n%s", code, errb.String())
	}
}
