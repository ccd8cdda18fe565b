package daemon

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/resolver"
)

func patterns(ss ...string) []config.NamePattern {
	var out []config.NamePattern
	for _, s := range ss {
		p, err := config.ParseNamePattern(s)
		if err != nil {
			panic(err)
		}
		out = append(out, p)
	}
	return out
}

func TestNameFilterRules(t *testing.T) {
	if f := nameFilter(&config.Access{}); f != nil {
		t.Fatal("no name rules must give a nil filter (zero cost)")
	}
	cases := []struct {
		name        string
		allow, deny []string
		yes, no     []string
	}{
		{"deny glob", nil, []string{"SECRET:*"}, []string{"OPEN:a", "secret:a"}, []string{"SECRET:a", "SECRET:"}},
		{"deny exact denies its fields", nil, []string{"BL:valve"}, []string{"BL:valve2", "BL:valve2.VAL"}, []string{"BL:valve", "BL:valve.VAL", "BL:valve.DESC"}},
		{"deny ?", nil, []string{"A:?"}, []string{"A:", "A:bc"}, []string{"A:b"}},
		{"allow list", []string{"LINAC:*", "re:RING:[0-9]+"}, nil, []string{"LINAC:x", "LINAC:x.VAL", "RING:42"}, []string{"RING:4a", "RING:", "BOOSTER:x", ""}},
		{"deny wins over allow", []string{"LINAC:*"}, []string{"LINAC:private:*"}, []string{"LINAC:x"}, []string{"LINAC:private:y", "OTHER"}},
		{"regex deny", nil, []string{"re:.*:(PASSWORD|KEY)"}, []string{"A:KEYS", "A:PASSWORDx"}, []string{"A:KEY", "x:y:PASSWORD"}},
	}
	for _, c := range cases {
		a := &config.Access{NameAllow: patterns(c.allow...), NameDeny: patterns(c.deny...)}
		f := nameFilter(a)
		for _, n := range c.yes {
			if !f([]byte(n)) {
				t.Errorf("%s: %q refused", c.name, n)
			}
		}
		for _, n := range c.no {
			if f([]byte(n)) {
				t.Errorf("%s: %q allowed", c.name, n)
			}
		}
	}
}

func BenchmarkNameFilter(b *testing.B) {
	f := nameFilter(&config.Access{NameAllow: patterns("LINAC:*", "re:RING:[0-9]+"), NameDeny: patterns("LINAC:x:*", "BL:valve")})
	names := [][]byte{[]byte("LINAC:abc:def.VAL"), []byte("RING:1234"), []byte("BOOSTER:q1")}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		f(names[i%3])
	}
}

func TestClientFilters(t *testing.T) {
	if tcpClientFilter(&config.Access{}) != nil || udpClientFilter(&config.Access{}) != nil {
		t.Fatal("empty client lists must give nil filters")
	}
	a := &config.Access{TCPClientDeny: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		UDPClientAllow: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}}
	tf, uf := tcpClientFilter(a), udpClientFilter(a)
	if tf(netip.MustParseAddr("10.1.2.3")) || !tf(netip.MustParseAddr("192.168.1.1")) {
		t.Error("TCP filter")
	}
	if uf(netip.MustParseAddr("10.1.2.3")) || !uf(netip.MustParseAddr("192.168.1.1")) {
		t.Error("UDP filter")
	}
}

// newIdleDaemon builds a daemon that was never started (no sockets) on a
// fake clock.
func newIdleDaemon(t *testing.T, c *config.Config) *Daemon {
	t.Helper()
	d, err := New(c, Options{Logger: zap.NewNop(), Clock: clock.NewFake(time.Time{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// The server allow list also covers the paths that bypass beacons: a
// loaded snapshot, static servers and static name files.
func TestServerAllowCoversSnapshotAndStatic(t *testing.T) {
	c := testConfig(t)
	d := newIdleDaemon(t, c)
	in, out := netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("192.0.2.7:5075")
	for i, ep := range []netip.AddrPort{in, out} {
		g := pva.GUID{byte(i + 1)}
		if _, err := d.Registry.UpsertServer(registry.ServerInfo{GUID: g, Addr: ep}); err != nil {
			t.Fatal(err)
		}
		d.Registry.AddNames(g, []string{"pv:" + ep.String()}, registry.SourceProbe)
	}
	d.dropDeniedServers(&c.Access, "snapshot server outside access.server_allow: dropped")
	if _, ok := d.Registry.Server(pva.GUID{2}); ok {
		t.Fatal("snapshot server outside the allow list kept")
	}
	if _, ok := d.Registry.Server(pva.GUID{1}); !ok {
		t.Fatal("allowed snapshot server dropped")
	}
	if got := d.allowedStatic([]netip.AddrPort{out, in}); len(got) != 1 || got[0] != in {
		t.Fatalf("static servers %v", got)
	}
	sink := serverAccessSink{probeSink{d}}
	sink.Listed(pva.GUID{3}, out, []string{"file:pv"}, probe.Info{File: "x.names"})
	if _, ok := d.Registry.LookupName("file:pv"); ok {
		t.Fatal("static names for a denied server registered")
	}
	sink.Listed(pva.GUID{4}, in, []string{"file:pv2"}, probe.Info{File: "y.names"})
	if _, ok := d.Registry.LookupName("file:pv2"); !ok {
		t.Fatal("static names for an allowed server not registered")
	}
	if d.deniedServers.Load() != 3 {
		t.Fatalf("denied servers counted %d, want 3", d.deniedServers.Load())
	}
}

// Registry poisoning: a new GUID beaconing from a known endpoint changes
// nothing until its own TCP listing arrives; then it replaces the old
// server, keeping the names it lists. A second server claiming an already
// held name does not take it over.
func TestNewGUIDAtEndpointNotTrustedUntilListed(t *testing.T) {
	d := newIdleDaemon(t, testConfig(t))
	ep := netip.MustParseAddrPort("127.0.0.1:1") // nothing listens: probes fail harmlessly
	g1, g2, g3 := pva.GUID{0x11}, pva.GUID{0x22}, pva.GUID{0x33}
	holder := func(n string) pva.GUID {
		h, ok := d.Registry.LookupName(n)
		if !ok || h == nil {
			return pva.GUID{}
		}
		return h.GUID
	}
	d.onBeaconEvent(beacon.Event{Kind: beacon.EventNew, GUID: g1, Endpoint: ep, Protocol: "tcp"})
	probeSink{d}.Listed(g1, ep, []string{"pv:1", "pv:2"}, probe.Info{})
	if holder("pv:1") != g1 {
		t.Fatal("setup: pv:1 not held by g1")
	}
	d.onBeaconEvent(beacon.Event{Kind: beacon.EventChanged, GUID: g2, OldGUID: g1, Endpoint: ep, Protocol: "tcp"})
	if _, ok := d.Registry.Server(g2); ok {
		t.Fatal("new GUID registered from a beacon alone")
	}
	if holder("pv:1") != g1 || holder("pv:2") != g1 {
		t.Fatal("old server's names moved before the new server was listed over TCP")
	}
	probeSink{d}.Listed(g2, ep, []string{"pv:1"}, probe.Info{})
	if holder("pv:1") != g2 || !holder("pv:2").IsZero() {
		t.Fatal("the TCP listing did not replace the old server")
	}
	if _, ok := d.Registry.Server(g1); ok {
		t.Fatal("old GUID kept after the new one was listed at its endpoint")
	}
	// Another server (allowed endpoint) claims pv:1 too: the first claim stays.
	ep3 := netip.MustParseAddrPort("127.0.0.2:1")
	d.onBeaconEvent(beacon.Event{Kind: beacon.EventNew, GUID: g3, Endpoint: ep3, Protocol: "tcp"})
	probeSink{d}.Listed(g3, ep3, []string{"pv:1", "pv:3"}, probe.Info{})
	if holder("pv:1") != g2 || holder("pv:3") != g3 {
		t.Fatalf("duplicate claim switched: pv:1 by %v", holder("pv:1"))
	}
}

// Wiring: the daemon's listeners and resolver get the access hooks.
func TestAccessWiring(t *testing.T) {
	c := testConfig(t)
	c.Search.Through = false
	c.Access.TCPClientDeny = []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}
	c.Access.NameDeny = patterns("secret:*")
	d := startDaemon(t, c)
	dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	nc, err := dl.Dial("tcp", d.tcpAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _ := nc.Read(make([]byte, 8)); n != 0 {
		t.Fatal("denied TCP client got a greeting")
	}
	nc.Close()
	if n := count(t, d, `pvans_access_denied_total{what="tcp_client"}`); n != 1 {
		t.Fatalf("TCP denied %d", n)
	}
	g := pva.GUID{0x44}
	d.Registry.UpsertServer(registry.ServerInfo{GUID: g, Addr: netip.MustParseAddrPort("127.0.0.1:1")})
	d.Registry.AddNames(g, []string{"secret:a", "open:a"}, registry.SourceProbe)
	var b resolver.Batch
	d.Resolver.Lookup([]pva.SearchName{{CID: 1, Name: []byte("secret:a")}, {CID: 2, Name: []byte("open:a")}}, &b)
	if len(b.Groups) != 1 || len(b.Groups[0].CIDs) != 1 || b.Groups[0].CIDs[0] != 2 || len(b.Missing) != 0 {
		t.Fatalf("lookup %+v missing %v", b.Groups, b.Missing)
	}
}
