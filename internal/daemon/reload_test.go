package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/addrmap"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// TestEveryPartHasOneApplier: every part a setting's row names has exactly
// one applier, and every applier belongs to a part some row names, so a
// live setting cannot name a part that nothing applies.
func TestEveryPartHasOneApplier(t *testing.T) {
	named := config.Parts()
	seen := map[config.Part]int{}
	for _, a := range appliers {
		seen[a.part]++
		if !slices.Contains(named, a.part) {
			t.Errorf("applier for %q, which no setting names", a.part)
		}
	}
	for _, p := range named {
		if seen[p] != 1 {
			t.Errorf("part %q has %d appliers, want 1", p, seen[p])
		}
	}
}

// In-process: a reload denying the TCP client closes its open connection
// and refuses the next one; a changed restart-only setting is reported and
// changes nothing; search-through off and on again.
func TestReloadInProcess(t *testing.T) {
	c := testConfig(t)
	d := startDaemon(t, c)
	cl := query(t, d)
	if err := cl.Search([]string{"nobody:has:this"}); err != nil {
		t.Fatal(err)
	}
	next := *c
	next.Access.TCPClientDeny = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	next.PVA.ServerPort++
	next.Search.Through = false
	applied, restart := d.Reload(&next)
	if !slices.Contains(applied, "access.tcp_client_deny") || !slices.Contains(applied, "search.through") ||
		slices.Contains(applied, "pva.server_port") || !slices.Equal(restart, []string{"pva.server_port"}) {
		t.Fatalf("applied %v, needs restart %v", applied, restart)
	}
	select {
	case <-cl.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("open connection of a newly denied client not closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c2, err := nsclient.Dial(ctx, d.tcpAddr()); err == nil {
		select {
		case <-c2.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("new connection of a denied client not closed")
		}
	}
	if d.TCP.Addrs()[0].Port() != c.PVA.ServerPort {
		t.Fatal("restart-only port changed while running")
	}

	back := *c
	applied, restart = d.Reload(&back)
	if len(restart) != 0 || !slices.Contains(applied, "search.through") {
		t.Fatalf("reload back: applied %v, needs restart %v", applied, restart)
	}
	cl = query(t, d)
	if err := cl.Search([]string{"still:nobody"}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "name handed to the search ring", func() bool { return d.Ring.Stats().Searching > 0 })
}

// TestReloadUnderLoad: 100 TCP clients search (names held, names nobody
// has, names a reload denies) while the configuration is reloaded 20
// times, alternating every group of reloadable settings. Run with -race:
// each part's settings are swapped while its goroutines read them.
func TestReloadUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("100 clients")
	}
	site := startSite(t, sim.Options{Servers: 2, NamesPerServer: 20, Host: lo})
	c := testConfig(t, site.UDPAddr())
	c.Static.Servers = []netip.AddrPort{site.Server(0).TCP}
	d := startDaemon(t, c)
	testutil.WaitFor(t, 10*time.Second, "static server listed", func() bool {
		return d.Registry.Lookup([]byte(site.Server(0).Names[0])) != nil
	})

	stop := testutil.Load(100, 5*time.Millisecond, func(i int) func() bool {
		cl := query(t, d)
		names := []string{site.Server(0).Names[i%20], site.Server(1).Names[i%20], fmt.Sprintf("load:none:%d", i)}
		return func() bool { return cl.Search(names) == nil } // fails once the connection is closed
	})

	variants := []func(n *config.Config){
		func(n *config.Config) { n.Access.NameDeny = mustPatterns(t, "sim:s1:*") },
		func(n *config.Config) { n.RateLimit.TCPMessagesPerSecond = 5 },
		func(n *config.Config) { n.RateLimit.Exempt = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} },
		func(n *config.Config) { n.Search.Through = false },
		func(n *config.Config) { n.Static.Servers = []netip.AddrPort{site.Server(0).TCP, site.Server(1).TCP} },
		func(n *config.Config) { n.PVA.AddrList = nil },
		func(n *config.Config) { n.Registry.MaxNames, n.TCP.WaitersTotal = 10, 1 },
		func(n *config.Config) { n.Beacon.Expiry, n.PVA.ConnTmo = 30*time.Second, 6 },
		func(n *config.Config) {
			n.RateLimit.UDPSearchesPerSecond, n.Access.UDPClientDeny = 1, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		},
		func(n *config.Config) { n.HTTP.AllowedHosts = []string{".example.org"} },
	}
	for i := range 20 {
		n := *c
		variants[i%len(variants)](&n)
		if i%2 == 1 {
			variants[(i+3)%len(variants)](&n)
		}
		d.Reload(&n)
		time.Sleep(50 * time.Millisecond)
	}
	d.Reload(c)
	searches := stop()
	t.Logf("%d searches during 20 reloads", searches)
	if searches < 100 {
		t.Fatalf("only %d searches: the clients did not run during the reloads", searches)
	}
	name := site.Server(1).Names[3]
	testutil.WaitFor(t, 10*time.Second, "answers after the reloads", func() bool {
		cl := query(t, d)
		if cl.Search([]string{name}) != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		a, _, _ := cl.Wait(ctx)
		return len(a) == 1 && a[0].GUID == site.Server(1).GUID
	})
}

func mustPatterns(t *testing.T, globs ...string) []config.NamePattern {
	t.Helper()
	var out []config.NamePattern
	for _, g := range globs {
		p, err := config.ParseNamePattern(g)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// A lowered tcp.max_connections closes no open connection and refuses the
// next one; raised again, the next one is served.
func TestReloadTCPLimitsApplyToNewConnections(t *testing.T) {
	c := testConfig(t)
	d := startDaemon(t, c)
	a, b := query(t, d), query(t, d)
	next := *c
	next.TCP.MaxConnections = 1
	d.Reload(&next)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if extra, err := nsclient.Dial(ctx, d.tcpAddr()); err == nil {
		select {
		case <-extra.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("connection beyond a lowered max_connections served")
		}
	}
	for _, cl := range []*nsclient.Client{a, b} {
		select {
		case <-cl.Done():
			t.Fatal("open connection closed by a lowered max_connections")
		default:
		}
		if err := cl.Search([]string{"x:y"}); err != nil {
			t.Fatal(err)
		}
	}
	d.Reload(c)
	cl := query(t, d)
	if err := cl.Search([]string{"x:y"}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "searches counted", func() bool { return count(t, d, "pvans_tcp_searches_total") >= 3 })
}

// A server taken off static.servers stays when beacons also announce it.
func TestReloadStaticRemovalKeepsBeaconedServer(t *testing.T) {
	c := testConfig(t)
	d := startDaemon(t, c)
	site := startSite(t, sim.Options{Servers: 1, Names: [][]string{{"both:pv"}}, Host: lo,
		BeaconDests: []netip.AddrPort{d.udpAddr()}, BeaconInterval: 200 * time.Millisecond})
	with := *c
	with.Static.Servers = []netip.AddrPort{site.Server(0).TCP}
	d.Reload(&with)
	testutil.WaitFor(t, 5*time.Second, "listed", func() bool { return d.Registry.Lookup([]byte("both:pv")) != nil })
	d.Reload(c)
	time.Sleep(time.Second)
	if d.Registry.Lookup([]byte("both:pv")) == nil {
		t.Fatal("a beaconing server was forgotten when taken off static.servers")
	}
}

// map.rules on reload: the next answer names the mapped endpoint.
func TestReloadAddressMap(t *testing.T) {
	c := testConfig(t)
	c.Search.Through = false
	d := startDaemon(t, c)
	site := startSite(t, sim.Options{Servers: 1, Names: [][]string{{"map:pv"}}, Host: lo,
		BeaconDests: []netip.AddrPort{d.udpAddr()}})
	ask := func() netip.AddrPort {
		cl := query(t, d)
		if err := cl.Search([]string{"map:pv"}); err != nil {
			t.Fatal(err)
		}
		return waitAnswers(t, cl, 5*time.Second)[0].Endpoint
	}
	testutil.WaitFor(t, 5*time.Second, "listed", func() bool { return d.Registry.Lookup([]byte("map:pv")) != nil })
	if ep := ask(); ep != site.Server(0).TCP {
		t.Fatalf("before: %v", ep)
	}
	m, err := addrmap.ParseMap([]string{"servers=" + site.Server(0).TCP.String() + " to=127.0.0.9:15075"})
	if err != nil {
		t.Fatal(err)
	}
	next := *c
	next.Map.Rules = m
	d.Reload(&next)
	if ep := ask(); ep != netip.MustParseAddrPort("127.0.0.9:15075") {
		t.Fatalf("after reloading map.rules: %v", ep)
	}
}
