// Package reload checks live reload on the real pvans binary: for each
// group of settings the test changes the configuration file, sends SIGHUP
// to the running daemon and observes the new behaviour on the wire or in
// the API. Everything runs on 127.0.0.1 with the automatic address lists
// off (test/harness).
package reload

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBuilds()
	os.Exit(code)
}

var lo = netip.MustParseAddr("127.0.0.1")

// daemon is a pvans reading its settings from a file the test rewrites.
type daemon struct {
	*harness.Pvans
	file string
}

// start runs pvans with the file holding yaml (the harness's flags set
// the addresses and ports, which a file cannot override).
func start(t *testing.T, yaml string, args ...string) *daemon {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the pvans binary")
	}
	file := filepath.Join(t.TempDir(), "pvans.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.Start(t, harness.Options{Args: append([]string{"--config", file}, args...)})
	t.Cleanup(p.Stop)
	return &daemon{Pvans: p, file: file}
}

// reload rewrites the file, sends SIGHUP and waits for the daemon to log
// that it reloaded.
func (d *daemon) reload(t *testing.T, yaml string) {
	t.Helper()
	reloadProc(t, d.Proc, d.file, yaml)
}

func reloadProc(t *testing.T, p *testutil.Proc, file, yaml string) {
	t.Helper()
	n := strings.Count(p.Output(), "configuration reloaded")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "reload logged", func() bool {
		return strings.Count(p.Output(), "configuration reloaded") > n
	})
}

func startSite(t *testing.T, o sim.Options) *sim.Site {
	t.Helper()
	o.Host = lo
	ctx, cancel := context.WithCancel(context.Background())
	s, err := sim.Start(ctx, o)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); cancel() })
	return s
}

func dial(t *testing.T, ep netip.AddrPort) *nsclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := nsclient.Dial(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func closedWithin(c *nsclient.Client, d time.Duration) bool {
	select {
	case <-c.Done():
		return true
	case <-time.After(d):
		return false
	}
}

func resolves(t *testing.T, d *daemon, name string, wait time.Duration) bool {
	t.Helper()
	ans, err := d.Query([]string{name}, wait)
	if err != nil {
		t.Fatal(err)
	}
	_, ok := ans[name]
	return ok
}

// Access lists: a name denied by reload is no longer answered; a TCP
// client denied by reload has its open connection closed and is closed
// at its next connection; a server outside a narrowed server_allow is
// dropped.
func TestReloadAccessLists(t *testing.T) {
	d := start(t, "search:\n  through: false\n")
	site := startSite(t, sim.Options{Servers: 1, Names: [][]string{{"acc:one", "acc:two"}}, BeaconDests: []netip.AddrPort{d.UDP}})
	testutil.WaitFor(t, 10*time.Second, "names listed", func() bool { ok, _ := d.HasName("acc:two"); return ok })
	if !resolves(t, d, "acc:one", 3*time.Second) {
		t.Fatal("acc:one not answered before the reload")
	}

	d.reload(t, "search:\n  through: false\naccess:\n  name_deny: [\"acc:one\"]\n")
	if resolves(t, d, "acc:one", time.Second) {
		t.Fatal("acc:one answered after access.name_deny was reloaded")
	}
	if !resolves(t, d, "acc:two", 3*time.Second) {
		t.Fatal("acc:two (not denied) no longer answered")
	}

	open := dial(t, d.TCP)
	d.reload(t, "search:\n  through: false\naccess:\n  tcp_client_deny: [127.0.0.0/8]\n")
	if !closedWithin(open, 5*time.Second) {
		t.Fatal("open connection of a client denied by reload not closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if next, err := nsclient.Dial(ctx, d.TCP); err == nil { // refused at accept: the handshake fails, or it closes
		defer next.Close()
		if !closedWithin(next, 5*time.Second) {
			t.Fatal("next connection of a client denied by reload not closed")
		}
	}
	if v := d.Metric(t, `pvans_access_denied_total{what="tcp_client"}`); v < 2 {
		t.Errorf("access_denied_total{tcp_client} = %v, want >= 2", v)
	}

	d.reload(t, "search:\n  through: false\naccess:\n  server_allow: [10.0.0.0/8]\n")
	testutil.WaitFor(t, 5*time.Second, "server outside the new server_allow dropped", func() bool {
		ok, _ := d.HasName("acc:two")
		return !ok
	})
	code, body, _ := d.Get("/v1/servers")
	if code != http.StatusOK || strings.Contains(string(body), site.Server(0).GUID.String()) {
		t.Fatalf("servers after narrowing server_allow: %d %s", code, body)
	}
}

// Rate limits and exemptions: a rate lowered by reload holds (searches
// beyond it are dropped and counted); an exemption added by reload lifts
// it.
func TestReloadRateLimit(t *testing.T) {
	d := start(t, "search:\n  through: false\n")
	const limited = `pvans_tcp_limit_hits_total{limit="rate_limited"}`
	burst := func(c *nsclient.Client, n int) {
		for i := range n {
			if err := c.Search([]string{fmt.Sprintf("rate:%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	countAfter := func(c *nsclient.Client, n int) float64 {
		before := d.Metric(t, `pvans_tcp_searches_total`) + d.Metric(t, limited)
		burst(c, n)
		testutil.WaitFor(t, 10*time.Second, "searches counted", func() bool {
			return d.Metric(t, `pvans_tcp_searches_total`)+d.Metric(t, limited) >= before+float64(n)
		})
		return d.Metric(t, limited)
	}

	c := dial(t, d.TCP)
	if v := countAfter(c, 50); v != 0 {
		t.Fatalf("%v searches rate limited at the default rate", v)
	}
	d.reload(t, "search:\n  through: false\nrate_limit:\n  tcp_messages_per_second: 1\n")
	v := countAfter(c, 50)
	if v < 40 {
		t.Fatalf("after lowering the rate to 1/s: %v of 50 searches limited, want >= 40", v)
	}
	v2 := countAfter(dial(t, d.TCP), 50) // a new connection from the same source: the limit holds
	if v2-v < 40 {
		t.Fatalf("lowered rate did not hold: %v more limited of 50", v2-v)
	}
	d.reload(t, "search:\n  through: false\nrate_limit:\n  tcp_messages_per_second: 1\n  exempt: [127.0.0.1/32]\n")
	if v3 := countAfter(c, 50); v3 != v2 {
		t.Fatalf("exempt source still limited: %v more", v3-v2)
	}
}

// Static servers and static name files: a server added to static.servers
// by reload is probed (its names appear) without any beacon; a names
// directory set by reload is read at once.
func TestReloadStatic(t *testing.T) {
	d := start(t, "search:\n  through: false\n")
	site := startSite(t, sim.Options{Servers: 1, Names: [][]string{{"static:a", "static:b"}}}) // never beacons to pvans
	time.Sleep(500 * time.Millisecond)
	if ok, _ := d.HasName("static:a"); ok {
		t.Fatal("name of a server pvans was not told about")
	}
	d.reload(t, fmt.Sprintf("search:\n  through: false\nstatic:\n  servers: [%s]\n", site.Server(0).TCP))
	testutil.WaitFor(t, 10*time.Second, "new static server probed and listed", func() bool {
		ok, _ := d.HasName("static:b")
		return ok
	})

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "127.0.0.1_5999.names"), []byte("file:pv1\nfile:pv2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.reload(t, fmt.Sprintf("search:\n  through: false\nstatic:\n  servers: [%s]\n  names_dir: %s\n", site.Server(0).TCP, dir))
	testutil.WaitFor(t, 10*time.Second, "static names file read", func() bool {
		ok, _ := d.HasName("file:pv2")
		return ok
	})
	// Removing the server from the list forgets it.
	d.reload(t, fmt.Sprintf("search:\n  through: false\nstatic:\n  names_dir: %s\n", dir))
	testutil.WaitFor(t, 10*time.Second, "static server removed by reload forgotten", func() bool {
		ok, _ := d.HasName("static:a")
		return !ok
	})
}

// Address lists and name servers: a destination added to addr_list by
// reload receives a discovery ping at once (not at the next restart); a
// name server added by reload is connected.
func TestReloadAddrListAndNameServers(t *testing.T) {
	d := start(t, "search:\n  through: true\n")
	dest, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer dest.Close()
	ns, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ns.Accept(); err == nil {
			accepted <- struct{}{}
			defer c.Close()
			time.Sleep(5 * time.Second)
		}
	}()

	d.reload(t, fmt.Sprintf("search:\n  through: true\npva:\n  addr_list: [%s]\n  name_servers: [%s]\n",
		dest.LocalAddr(), ns.Addr()))
	_ = dest.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 2048)
	n, _, err := dest.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("no datagram at the new addr_list destination: %v", err)
	}
	h, payload, _, err := pva.SplitMessage(buf[:n])
	var s pva.Search
	if err != nil || h.Command != pva.CmdSearch || s.Decode(payload, h.BigEndian()) != nil || !s.IsDiscovery() || !s.MustReply() {
		t.Fatalf("datagram at the new destination is not a discovery ping: %x", buf[:n])
	}
	select {
	case <-accepted:
	case <-time.After(15 * time.Second):
		t.Fatal("name server added by reload not connected")
	}
}

// Beacon timings: a beacon expiry lowered by reload expires a server that
// beacons less often than the new expiry (the tracker loses it; its names
// stay while its watch connection answers, since only TCP removes names).
func TestReloadBeaconExpiry(t *testing.T) {
	d := start(t, "search:\n  through: false\n")
	startSite(t, sim.Options{Servers: 1, Names: [][]string{{"tim:a"}}, BeaconDests: []netip.AddrPort{d.UDP},
		BeaconInterval: time.Hour})
	testutil.WaitFor(t, 10*time.Second, "server listed", func() bool { ok, _ := d.HasName("tim:a"); return ok })

	lost := `pvans_beacon_events_total{kind="lost"}`
	if v := d.Metric(t, lost); v != 0 {
		t.Fatalf("%s = %v before the expiry was lowered", lost, v)
	}
	d.reload(t, "search:\n  through: false\nbeacon:\n  expiry: 2s\n")
	testutil.WaitFor(t, 15*time.Second, "server expired at the new beacon expiry", func() bool { return d.Metric(t, lost) >= 1 })
	if ok, _ := d.HasName("tim:a"); !ok {
		t.Fatal("a beacon expiry removed names that the watch connection still proves")
	}
}

// Search-through on and off: a name only search-through can find is
// unresolved while it is off and found once a reload turns it on.
func TestReloadSearchThrough(t *testing.T) {
	site := startSite(t, sim.Options{Servers: 1, Names: [][]string{{"hid:den"}}, NoPing: true}) // no beacons, no discovery answers
	off := fmt.Sprintf("pva:\n  addr_list: [%s]\nsearch:\n  through: false\n", site.UDPAddr())
	d := start(t, off)
	if resolves(t, d, "hid:den", 2*time.Second) {
		t.Fatal("found with search-through off")
	}
	d.reload(t, strings.Replace(off, "through: false", "through: true", 1))
	if !resolves(t, d, "hid:den", 10*time.Second) {
		t.Fatal("not found after search-through was turned on by reload")
	}
}

// Registry limits: raised by reload, a server refused at the old bound is
// taken at its next sighting; lowered, nothing is removed.
func TestReloadRegistryLimits(t *testing.T) {
	d := start(t, "search:\n  through: false\nregistry:\n  max_servers: 1\n")
	startSite(t, sim.Options{Servers: 2, NamesPerServer: 3, BeaconDests: []netip.AddrPort{d.UDP}, BeaconInterval: 300 * time.Millisecond})
	servers := func() int {
		_, b, _ := d.Get("/v1/servers")
		var ss []json.RawMessage
		_ = json.Unmarshal(b, &ss)
		return len(ss)
	}
	testutil.WaitFor(t, 10*time.Second, "one server at the bound", func() bool { return servers() == 1 })
	time.Sleep(time.Second)
	if n := servers(); n != 1 {
		t.Fatalf("%d servers at max_servers 1", n)
	}
	d.reload(t, "search:\n  through: false\nregistry:\n  max_servers: 4\n")
	testutil.WaitFor(t, 10*time.Second, "second server taken after raising the bound", func() bool { return servers() == 2 })
	d.reload(t, "search:\n  through: false\nregistry:\n  max_servers: 1\n")
	time.Sleep(time.Second)
	if n := servers(); n != 2 {
		t.Fatalf("lowering the bound removed servers: %d left", n)
	}
}

// HTTP settings other than the listen address: a DNS name added to
// http.allowed_hosts by reload is answered from the next request on.
func TestReloadHTTP(t *testing.T) {
	d := start(t, "http:\n  allowed_hosts: []\n")
	get := func() int {
		req, err := http.NewRequest(http.MethodGet, d.HTTP+"/v1/servers", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "pvans.site.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get(); c != http.StatusMisdirectedRequest {
		t.Fatalf("a DNS name not allowed: %d, want 421", c)
	}
	d.reload(t, "http:\n  allowed_hosts: [.site.example]\n")
	testutil.WaitFor(t, 5*time.Second, "the name allowed after the reload", func() bool { return get() == http.StatusOK })
}

// A changed restart-only setting is logged as needing a restart and is
// not applied; a setting that is now a constant (udpsearch.DefaultBeaconQueue) is
// ignored with a warning, not refused; an invalid file keeps the last
// good configuration.
func TestReloadRestartOnlyAndInvalid(t *testing.T) {
	d := start(t, "search:\n  through: false\n")
	d.reload(t, "search:\n  through: false\n  discovery_at_start: false\nudp:\n  beacon_queue: 100\ninsight:\n  names: 100\n")
	testutil.WaitFor(t, 5*time.Second, "needs restart logged", func() bool {
		out := d.Output()
		return strings.Contains(out, "needs restart") && strings.Contains(out, `"setting":"insight.names"`) &&
			strings.Contains(out, `"setting":"search.discovery_at_start"`) &&
			strings.Contains(out, "WARNING: setting ignored: file "+d.file) &&
			strings.Contains(out, "udp.beacon_queue is no longer a setting")
	})

	n := strings.Count(d.Output(), "keeping the last good configuration")
	if err := os.WriteFile(d.file, []byte("access:\n  name_deny: [\"re:(\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = d.Signal(syscall.SIGHUP)
	testutil.WaitFor(t, 5*time.Second, "invalid file refused", func() bool {
		return strings.Count(d.Output(), "keeping the last good configuration") > n
	})
	if code, _, err := d.Get("/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("unhealthy after a refused reload: %d %v", code, err)
	}
}

// Log level and format: both switch on reload (the harness fixes the
// format by flag, so this starts the binary itself).
func TestReloadLogLevelAndFormat(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pvans binary")
	}
	file := filepath.Join(t.TempDir(), "pvans.yaml")
	if err := os.WriteFile(file, []byte("log:\n  level: info\n  format: json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tcp, udp, web := harness.FreePort(t), harness.FreePort(t), harness.FreePort(t)
	cmd := exec.Command(harness.Binary(t), "run", "--config", file, "--interfaces", "127.0.0.1",
		"--server-port", fmt.Sprint(tcp), "--broadcast-port", fmt.Sprint(udp),
		"--auto-addr-list=false", "--auto-beacon-addr-list=false", "--discovery-at-start=false",
		"--http-listen", fmt.Sprintf("127.0.0.1:%d", web), "--snapshot-path", "")
	cmd.Env = testutil.IsolatedEnv()
	p := testutil.StartProc(t, "pvans", cmd)
	t.Cleanup(func() { _ = p.Signal(syscall.SIGTERM); p.WaitExit(t, 20*time.Second) })
	testutil.WaitFor(t, 20*time.Second, "started", func() bool { return strings.Contains(p.Output(), "pvans started") })
	if strings.Contains(p.Output(), `"level":"debug"`) {
		t.Fatal("debug lines at level info")
	}

	mark := len(p.Output())
	reloadProc(t, p, file, "log:\n  level: debug\n  format: console\n")
	after := p.Output()[mark:]
	if strings.Contains(after, `{"level":`) {
		t.Fatalf("JSON lines after switching to console:\n%s", after)
	}
	if !strings.Contains(after, "INFO") || !strings.Contains(after, "configuration reloaded") ||
		!strings.Contains(after, "DEBUG") || !strings.Contains(after, "setting applied") {
		t.Fatalf("no console lines at debug level after the switch:\n%s", after)
	}
}
