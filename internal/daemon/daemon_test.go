package daemon

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

var lo = netip.MustParseAddr("127.0.0.1")

// testConfig is config.Loopback on free ports, with search-through to
// searchDest.
func testConfig(t *testing.T, searchDest ...netip.AddrPort) *config.Config {
	c := config.Loopback(testutil.FreeTCPPort(t), testutil.FreeUDPPort(t))
	c.PVA.AddrList = nil
	for _, ap := range searchDest {
		c.PVA.AddrList = append(c.PVA.AddrList, config.EndpointOf(ap))
	}
	c.HTTP.Listen = "127.0.0.1:0"
	c.Search.Through = true
	c.Search.DiscoveryAtStart = len(searchDest) > 0
	return &c
}

// testEcho is the probes' ECHO period in the daemon tests (production:
// PVXS's echo of pva.conn_tmo, 15 s), so a server's silent death is seen
// in about a second.
const testEcho = 300 * time.Millisecond

// fast is the daemon tests' Options.TestBounds: a fast probe echo and a
// first retry 100 ms after a failed probe (production: 1 s).
func fast(b *Bounds) { b.ProbeEcho, b.ProbeBackoffMin = testEcho, 100*time.Millisecond }

// fastAnd is fast, then tune.
func fastAnd(tune func(*Bounds)) func(*Bounds) {
	return func(b *Bounds) { fast(b); tune(b) }
}

func startDaemon(t *testing.T, c *config.Config) *Daemon {
	t.Helper()
	return startDaemonWith(t, c, fast)
}

// startDaemonWith is startDaemon with the test's bounds.
func startDaemonWith(t *testing.T, c *config.Config, bounds func(*Bounds)) *Daemon {
	t.Helper()
	d, err := New(c, Options{Logger: zaptest.NewLogger(t), TestBounds: bounds})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// startSite runs a simulated site until the test ends.
func startSite(t *testing.T, o sim.Options) *sim.Site {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	site, err := sim.Start(ctx, o)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close(); cancel() })
	return site
}

func (d *Daemon) udpAddr() netip.AddrPort {
	return netip.AddrPortFrom(lo, d.UDP.LocalAddr().Port())
}

func (d *Daemon) tcpAddr() netip.AddrPort { return d.TCP.Addrs()[0] }

func query(t *testing.T, d *Daemon) *nsclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := nsclient.Dial(ctx, d.tcpAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func waitAnswers(t *testing.T, c *nsclient.Client, d time.Duration) []nsclient.Answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	a, unresolved, err := c.Wait(ctx)
	if err != nil || len(unresolved) > 0 {
		t.Fatalf("answers %+v, unresolved %v, err %v", a, unresolved, err)
	}
	return a
}

// A client waits for a name no server has; a server starts serving it and
// beacons; the answer is pushed to the waiting client without a retry.
func TestPushOnNewServerBeacon(t *testing.T) {
	c := testConfig(t)
	c.Search.Through = false
	d := startDaemon(t, c)
	cl := query(t, d)
	if err := cl.Search([]string{"late:pv:one", "late:pv:two"}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "waiters registered", func() bool { return d.Resolver.Stats().Waiting == 2 })

	// The client searched once and never again (nsclient does not
	// retry), and search-through is off: an answer at all is the push
	// the beacon started. The wait only guards against a hang.
	first := time.Now()
	site := startSite(t, sim.Options{Names: [][]string{{"late:pv:one", "late:pv:two", "other"}}, Host: lo,
		BeaconDests: []netip.AddrPort{d.udpAddr()}})
	ans := waitAnswers(t, cl, 60*time.Second)
	t.Logf("pushed answer %s after the server's first beacon", time.Since(first))
	for _, a := range ans {
		if a.GUID != site.Server(0).GUID || a.Endpoint != site.Server(0).TCP {
			t.Fatalf("answer %+v, want server %+v", a, site.Server(0))
		}
	}
}

// A name no probe lists (the server never beacons to pvans) is found by
// search-through on the server network and pushed to the client.
func TestSearchThroughResolvesUnlistedServer(t *testing.T) {
	site := startSite(t, sim.Options{Servers: 2, Names: [][]string{{"hidden:a", "hidden:b"}, {"hidden:c"}}, Host: lo})
	d := startDaemon(t, testConfig(t, site.UDPAddr()))
	cl := query(t, d)
	if err := cl.Search([]string{"hidden:a", "hidden:c"}); err != nil {
		t.Fatal(err)
	}
	ans := waitAnswers(t, cl, 5*time.Second)
	got := map[string]netip.AddrPort{}
	for _, a := range ans {
		got[a.Name] = a.Endpoint
	}
	if got["hidden:a"] != site.Server(0).TCP || got["hidden:c"] != site.Server(1).TCP {
		t.Fatalf("answers %v, want %v and %v", got, site.Server(0).TCP, site.Server(1).TCP)
	}
	// The servers found this way are then listed too (probe), and the ring is empty again.
	testutil.WaitFor(t, 5*time.Second, "registry learned hidden:b by probing", func() bool {
		_, ok := d.Registry.LookupName("hidden:b")
		return ok
	})
	testutil.WaitFor(t, 15*time.Second, "ring empty", func() bool { return d.Ring.Stats().Searching == 0 })
}

// Names leave the registry quickly when a server closes cleanly, and within
// a few echo intervals when it dies silently.
func TestServerDeathRemovesNames(t *testing.T) {
	c := testConfig(t)
	c.Search.Through = false
	d := startDaemon(t, c)
	site := startSite(t, sim.Options{Servers: 2, Names: [][]string{{"clean:1", "clean:2"}, {"silent:1"}}, Host: lo,
		BeaconDests: []netip.AddrPort{d.udpAddr()}})
	testutil.WaitFor(t, 5*time.Second, "3 names", func() bool { return d.Registry.Counts().Names == 3 })

	if err := site.Stop(0); err != nil {
		t.Fatal(err)
	}
	took := testutil.WaitFor(t, 30*time.Second, "clean close removes names", func() bool {
		_, ok := d.Registry.LookupName("clean:1")
		return !ok
	})
	t.Logf("clean close: names gone after %s", took)

	if err := site.Kill(1); err != nil {
		t.Fatal(err)
	}
	took = testutil.WaitFor(t, 10*testEcho+2*time.Second, "silent death removes names", func() bool {
		_, ok := d.Registry.LookupName("silent:1")
		return !ok
	})
	t.Logf("silent death: names gone after %s (echo interval %s)", took, testEcho)
	if took > 4*testEcho {
		t.Errorf("silent death detected after %s, want within about 2 echo intervals (%s)", took, 2*testEcho)
	}
}

// A restarted server (new GUID at the same endpoint) replaces the old one:
// clients are answered with the new GUID, never the stale one.
func TestRestartWithNewGUID(t *testing.T) {
	c := testConfig(t)
	c.Search.Through = false
	d := startDaemon(t, c)
	// The PVXS beacon schedule: the new instance's first beacon goes out
	// as it starts. The site's clock never moves, so each instance sends
	// that one beacon and no other: the new GUID is followed from its
	// first beacon (or the old instance's close), however long the
	// machine takes, and not from a later beacon.
	site := startSite(t, sim.Options{Names: [][]string{{"rs:1"}}, Host: lo, BeaconDests: []netip.AddrPort{d.udpAddr()},
		Clock: clock.NewFake(time.Now())})
	old := site.Server(0).GUID
	testutil.WaitFor(t, 30*time.Second, "name registered", func() bool { _, ok := d.Registry.LookupName("rs:1"); return ok })
	if err := site.Restart(0); err != nil {
		t.Fatal(err)
	}
	nu := site.Server(0).GUID
	if nu == old {
		t.Fatal("restart kept the GUID")
	}
	took := testutil.WaitFor(t, 60*time.Second, "new GUID answers", func() bool {
		h, ok := d.Registry.LookupName("rs:1")
		return ok && h.GUID == nu
	})
	t.Logf("new instance answered %s after its first beacon", took)
	if _, ok := d.Registry.Server(old); ok {
		t.Fatal("old GUID still registered")
	}
	cl := query(t, d)
	if err := cl.Search([]string{"rs:1"}); err != nil {
		t.Fatal(err)
	}
	if a := waitAnswers(t, cl, 30*time.Second); a[0].GUID != nu {
		t.Fatalf("answered with %s, want new GUID %s", a[0].GUID, nu)
	}
}

// A server's last sighting follows its beacons, not only its first one.
func TestLastSeenFollowsBeacons(t *testing.T) {
	c := testConfig(t)
	c.Search.Through = false
	d := startDaemon(t, c)
	site := startSite(t, sim.Options{Names: [][]string{{"ls:1"}}, Host: lo, BeaconDests: []netip.AddrPort{d.udpAddr()},
		BeaconInterval: 50 * time.Millisecond})
	g := site.Server(0).GUID
	view := regView{d.Registry, d.Tracker}
	testutil.WaitFor(t, 5*time.Second, "server registered", func() bool { _, ok := view.Server(g); return ok })
	first, _ := view.Server(g)
	testutil.WaitFor(t, 5*time.Second, "last_seen to move with later beacons", func() bool {
		s, _ := view.Server(g)
		return s.LastSeen.Sub(first.LastSeen) >= 100*time.Millisecond
	})
	if ss := view.View().Servers; len(ss) != 1 || !ss[0].LastSeen.After(first.LastSeen) {
		t.Fatalf("View() last seen not refreshed: %+v", ss)
	}
}

// A missing beacon is no proof a server is gone: while its watch
// connection answers, beacon expiry keeps it; without one, expiry removes
// it.
func TestBeaconExpiryKeepsWatchedServer(t *testing.T) {
	c := testConfig(t)
	c.Search.Through = false
	d := startDaemon(t, c)
	site := startSite(t, sim.Options{Names: [][]string{{"w:1"}}, Host: lo, BeaconDests: []netip.AddrPort{d.udpAddr()}})
	srv := site.Server(0)
	testutil.WaitFor(t, 5*time.Second, "name registered and watched", func() bool {
		_, ok := d.Registry.LookupName("w:1")
		_, w := d.Prober.Watching(srv.TCP)
		return ok && w
	})
	d.onBeaconEvent(beacon.Event{Kind: beacon.EventLost, GUID: srv.GUID, Endpoint: srv.TCP, Protocol: "tcp"})
	if _, ok := d.Registry.LookupName("w:1"); !ok {
		t.Fatal("beacon expiry removed a server whose watch connection is up")
	}
	// An endpoint nobody watches: expiry removes it.
	ep, g := netip.MustParseAddrPort("127.0.0.1:1"), pva.GUID{0x77}
	if _, err := d.Registry.Listed(registry.ServerInfo{GUID: g, Addr: ep}, []string{"w:2"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	d.onBeaconEvent(beacon.Event{Kind: beacon.EventLost, GUID: g, Endpoint: ep, Protocol: "tcp"})
	if _, ok := d.Registry.LookupName("w:2"); ok {
		t.Fatal("beacon expiry kept an unwatched server")
	}
}

// TestNameCountReads: event details are read by people ("listed (1 name)",
// not "1 names").
func TestNameCountReads(t *testing.T) {
	for n, want := range map[int]string{0: "0 names", 1: "1 name", 2: "2 names", 100: "100 names"} {
		if got := nameCount(n); got != want {
			t.Errorf("nameCount(%d) = %q, want %q", n, got, want)
		}
	}
}

// A hung server is lost at its watch connection's echo and again, minutes
// later, when its beacons expire: the loss is reported once.
func TestLossReportedOnce(t *testing.T) {
	c := testConfig(t)
	c.Search.Through = false
	d := startDaemon(t, c)
	ep, g := netip.MustParseAddrPort("127.0.0.1:1"), pva.GUID{0x78}
	if _, err := d.Registry.Listed(registry.ServerInfo{GUID: g, Addr: ep}, []string{"once:1"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	lost := func() int {
		n := 0
		for _, e := range d.Events.Recent(200) {
			if e.Kind == "lost" && e.GUID == g.String() {
				n++
			}
		}
		return n
	}
	probeSink{d}.Lost(g, ep, "no reply to echo")
	if n := lost(); n != 1 {
		t.Fatalf("%d lost events after the watch ended, want 1", n)
	}
	d.onBeaconEvent(beacon.Event{Kind: beacon.EventLost, GUID: g, Endpoint: ep, Protocol: "tcp"})
	if n := lost(); n != 1 {
		t.Errorf("%d lost events after its beacons expired too, want 1", n)
	}
}

// A server lost after it was listed stays down until it is listed again
// at its endpoint; a row only beacons made (forged or not) is no server
// an operator knew, and is not kept.
func TestLostServerKeptDown(t *testing.T) {
	c := testConfig(t)
	c.Search.Through = false
	d := startDaemon(t, c)
	ep, g := netip.MustParseAddrPort("127.0.0.1:1"), pva.GUID{0x79}
	if _, err := d.Registry.Listed(registry.ServerInfo{GUID: g, Addr: ep}, []string{"down:1"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	_ = d.Registry.SetProbeState(g, registry.ProbeListed, nil)
	probeSink{d}.Lost(g, ep, "no reply to echo")
	keep := httpapi.DefaultShowDownFor
	if l := d.Down.List(d.clk.Now(), keep); len(l) != 1 || l[0].Endpoint != ep || l[0].Reason != "no reply to echo" || l[0].Names != 1 {
		t.Fatalf("down after the loss: %+v", l)
	}
	// Back: a new instance listed at the endpoint.
	probeSink{d}.Listed(pva.GUID{0x7a}, ep, []string{"down:1"}, probe.Info{})
	if l := d.Down.List(d.clk.Now(), keep); len(l) != 0 {
		t.Fatalf("still down after it was listed again: %+v", l)
	}
	// A row only a beacon made, lost when its beacons expire.
	fep, fg := netip.MustParseAddrPort("127.0.0.1:2"), pva.GUID{0x7b}
	if _, err := d.Registry.UpsertServer(registry.ServerInfo{GUID: fg, Addr: fep}); err != nil {
		t.Fatal(err)
	}
	d.onBeaconEvent(beacon.Event{Kind: beacon.EventLost, GUID: fg, Endpoint: fep, Protocol: "tcp"})
	if l := d.Down.List(d.clk.Now(), keep); len(l) != 0 {
		t.Fatalf("a beacon-only row kept as down: %+v", l)
	}
}

// A restart is told the same way in the log and in /v1/events: the
// steps the log names ("server restarted") are events too, whichever
// part noticed the old instance go first.
func TestRestartStepsInEvents(t *testing.T) {
	c := testConfig(t)
	c.Search.Through = false
	d := startDaemon(t, c)
	site := startSite(t, sim.Options{Names: [][]string{{"rs:1"}}, Host: lo, BeaconDests: []netip.AddrPort{d.udpAddr()},
		BeaconInterval: 200 * time.Millisecond})
	testutil.WaitFor(t, 30*time.Second, "name registered", func() bool { _, ok := d.Registry.LookupName("rs:1"); return ok })
	old := site.Server(0).GUID
	if err := site.Restart(0); err != nil {
		t.Fatal(err)
	}
	nu := site.Server(0).GUID
	testutil.WaitFor(t, 30*time.Second, "the new instance listed", func() bool {
		h, ok := d.Registry.LookupName("rs:1")
		return ok && h.GUID == nu
	})
	kinds := map[string]int{}
	for _, e := range d.Events.Recent(200) {
		if e.GUID == nu.String() || e.GUID == old.String() {
			kinds[e.Kind]++
		}
	}
	if kinds["restarted"] != 1 || kinds["lost"] > 1 {
		t.Errorf("events for the restart %v: want one \"restarted\" (as the log says) and at most one \"lost\"", kinds)
	}
}
