package daemon

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/testutil"
)

// tableDNS answers host names from a table the test edits.
type tableDNS struct {
	mu sync.Mutex
	m  map[string][]netip.Addr
}

func (r *tableDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.m[host]), nil
}

func (r *tableDNS) set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[host] = nil
	for _, a := range addrs {
		r.m[host] = append(r.m[host], netip.MustParseAddr(a))
	}
}

func startFake(t *testing.T, c *config.Config, dns *tableDNS) (*Daemon, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	o := Options{Logger: zaptest.NewLogger(t), Clock: clk, TestBounds: fast}
	if dns != nil {
		o.Resolver = dns
	}
	d, err := New(c, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d, clk
}

// udpSink counts discovery pings arriving at a search destination.
func udpSink(t *testing.T) (netip.AddrPort, func(time.Duration) int) {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	count := func(wait time.Duration) int {
		n := 0
		buf := make([]byte, 2048)
		for {
			c.SetReadDeadline(time.Now().Add(wait))
			k, _, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return n
			}
			if h, p, _, err := pva.SplitMessage(buf[:k]); err == nil && h.Command == pva.CmdSearch {
				var s pva.Search
				if s.Decode(p, h.BigEndian()) == nil && len(s.Names) == 0 {
					n++
				}
			}
		}
	}
	return c.LocalAddr().(*net.UDPAddr).AddrPort(), count
}

// discovery.interval sends a discovery ping to every search destination
// each interval, on the daemon's clock, counted by trigger; a reload to 0
// stops them.
func TestPeriodicDiscovery(t *testing.T) {
	dest, pings := udpSink(t)
	c := testConfig(t, dest)
	c.Discovery.Interval = time.Minute
	d, clk := startFake(t, c, nil)
	if n := pings(300 * time.Millisecond); n != 1 {
		t.Fatalf("%d pings at start, want 1", n)
	}
	clk.Advance(59 * time.Second)
	if n := pings(200 * time.Millisecond); n != 0 {
		t.Fatalf("%d pings before the interval", n)
	}
	for i := 0; i < 3; i++ {
		clk.Advance(time.Minute)
	}
	if n := pings(300 * time.Millisecond); n != 3 {
		t.Fatalf("%d pings over three intervals, want 3", n)
	}
	if p, s := d.discoveries[discoverPeriodic].Load(), d.discoveries[discoverStart].Load(); p != 3 || s != 1 {
		t.Errorf("rounds: periodic %d, start %d", p, s)
	}
	next := *c
	next.Discovery.Interval = 0
	d.Reload(&next)
	clk.Advance(10 * time.Minute)
	if n := pings(200 * time.Millisecond); n != 0 {
		t.Fatalf("%d pings after discovery.interval went to 0", n)
	}
}

// Host names in static.servers, pva.addr_list, pva.name_servers and
// relay.to are resolved again every dns.refresh with all their
// addresses; the lists follow, and a name whose lookup has not answered
// yet keeps its address from load.
func TestListsFollowDNS(t *testing.T) {
	dns := &tableDNS{m: map[string][]netip.Addr{}}
	dns.set("ioc.test", "127.0.0.2", "127.0.0.3")
	dns.set("sub.test", "127.0.0.9")
	c := testConfig(t)
	port := testutil.FreeTCPPort(t)
	c.Static.ServerEntries = []config.Endpoint{{AddrPort: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), port), TTL: config.NoTTL, Host: "ioc.test"}}
	c.Static.Servers = config.AddrPorts(c.Static.ServerEntries)
	c.PVA.AddrList = []config.Endpoint{{AddrPort: netip.MustParseAddrPort("127.0.0.9:5999"), TTL: config.NoTTL, Host: "sub.test"}}
	c.DNS.Refresh = 30 * time.Second
	d, clk := startFake(t, c, dns)

	static := func() []netip.AddrPort {
		var out []netip.AddrPort
		for _, s := range d.Prober.Servers() {
			if s.Static {
				out = append(out, s.Endpoint)
			}
		}
		slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
		return out
	}
	ep := func(a string) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr(a), port) }
	testutil.WaitFor(t, 5*time.Second, "the first lookup round expands ioc.test to both addresses", func() bool {
		return slices.Equal(static(), []netip.AddrPort{ep("127.0.0.2"), ep("127.0.0.3")})
	})
	// A pod restart: the name moves; the next round follows it.
	dns.set("ioc.test", "127.0.0.4")
	dns.set("sub.test", "127.0.0.10")
	clk.Advance(30 * time.Second)
	testutil.WaitFor(t, 5*time.Second, "the next round follows the new address", func() bool {
		return slices.Equal(static(), []netip.AddrPort{ep("127.0.0.4")})
	})
	testutil.WaitFor(t, 5*time.Second, "the search destination follows", func() bool {
		return slices.Equal(d.UDP.SearchDestinations(), []netip.AddrPort{netip.MustParseAddrPort("127.0.0.10:5999")})
	})
	if !d.earned(pva.GUID{}, ep("127.0.0.4")) {
		t.Error("a static server known by its name's new address is not the operator's")
	}
	if d.discoveries[discoverDNS].Load() == 0 {
		t.Error("no discovery ping to the new search destination")
	}
}

// The relay profile hands accepted sightings only to the relay: nothing
// is tracked or probed, and no TCP name server listens.
func TestRelayOnly(t *testing.T) {
	central, _ := udpSink(t)
	c := testConfig(t)
	c.Relay.To = []config.Endpoint{config.EndpointOf(central)}
	c.Relay.Only = true
	d, _ := startFake(t, c, nil)
	if len(d.TCP.Addrs()) != 0 {
		t.Errorf("relay profile listens on %v", d.TCP.Addrs())
	}
	beaconFilter{d}.Observe(beacon.Observation{GUID: pva.GUID{9}, Endpoint: netip.MustParseAddrPort("10.9.0.5:5075"), Protocol: "tcp", Via: beacon.ViaBeacon,
		From: netip.MustParseAddrPort("10.9.0.5:5076")})
	if _, ok := d.Tracker.Lookup(netip.MustParseAddrPort("10.9.0.5:5075"), "tcp"); ok {
		t.Error("the relay profile tracked a sighting")
	}
	if n, dg := count(t, d, "pvans_relay_sightings_total"), count(t, d, "pvans_relay_datagrams_total"); n != 1 || dg != 1 {
		t.Errorf("relayed %d sightings in %d datagrams, want 1 and 1", n, dg)
	}
}

// A DNS answer for a name in static.servers or pva.name_servers obeys the
// rule a relay's sighting follows (udpsearch's relayable): re-pointed to
// a loopback (or multicast, broadcast, link-local, unspecified, or this
// host's own) address, the name does not make pvans list that server and
// tell remote clients "any", nor trust it as an upstream name server.
// The address the name had at load stays (the operator's check-config saw
// it), and access.server_allow naming the address says it is meant.
// (issue 39, row 10)
func TestDNSAnswersFollowTheAddressRule(t *testing.T) {
	dns := &tableDNS{m: map[string][]netip.Addr{}}
	dns.set("ioc.test", "127.0.0.2")
	dns.set("ns.test", "127.0.0.3")
	c := testConfig(t)
	c.Access.ServerAllow = nil // the default: every server address
	port := testutil.FreeTCPPort(t)
	entry := func(host, addr string) config.Endpoint {
		return config.Endpoint{AddrPort: netip.AddrPortFrom(netip.MustParseAddr(addr), port), TTL: config.NoTTL, Host: host}
	}
	c.Static.ServerEntries = []config.Endpoint{entry("ioc.test", "127.0.0.2")}
	c.Static.Servers = config.AddrPorts(c.Static.ServerEntries)
	c.PVA.NameServerEntries = []config.Endpoint{entry("ns.test", "127.0.0.3")}
	c.PVA.NameServers = config.AddrPorts(c.PVA.NameServerEntries)
	c.DNS.Refresh = 30 * time.Second
	d, clk := startFake(t, c, dns)
	ep := func(a string) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr(a), port) }
	lists := func() (static, ns []netip.AddrPort) {
		l := d.lists.Load()
		if l == nil {
			return nil, nil
		}
		return l.static, l.nameServers
	}
	// Each round whose answers changed ends with a "dns" event, after the
	// lists were applied.
	rounds := func() int {
		n := 0
		for _, e := range d.Events.Recent(0) {
			if e.Kind == "dns" {
				n++
			}
		}
		return n
	}
	testutil.WaitFor(t, 5*time.Second, "the first round applied", func() bool { return rounds() >= 1 })

	// Re-pointed beside their load addresses, to loopback addresses no
	// configuration named: not followed there.
	dns.set("ioc.test", "127.0.0.2", "127.0.0.20")
	dns.set("ns.test", "127.0.0.3", "127.0.0.30")
	clk.Advance(30 * time.Second)
	testutil.WaitFor(t, 5*time.Second, "the next round applied", func() bool { return rounds() >= 2 })
	static, ns := lists()
	if !slices.Equal(static, []netip.AddrPort{ep("127.0.0.2")}) || !slices.Equal(ns, []netip.AddrPort{ep("127.0.0.3")}) {
		t.Errorf("static %v, name servers %v: a DNS answer named loopback addresses the configuration did not", static, ns)
	}
	for _, s := range d.Prober.Servers() {
		if s.Endpoint == ep("127.0.0.20") {
			t.Errorf("static server probed at the re-pointed loopback address: %+v", s)
		}
	}

	// access.server_allow naming the address says the operator means it.
	next := *c
	next.Access.ServerAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	d.Reload(&next)
	testutil.WaitFor(t, 5*time.Second, "followed where server_allow names it", func() bool {
		static, ns := lists()
		return slices.Equal(static, []netip.AddrPort{ep("127.0.0.2"), ep("127.0.0.20")}) && slices.Equal(ns, []netip.AddrPort{ep("127.0.0.3"), ep("127.0.0.30")})
	})
}

// A central instance pings each trusted relay written as one address at
// start, so the relay re-announces what it heard (issue 41), and again
// when the relays change, but not at periodic rounds: a relay
// re-announces a server for beacon.expiry after its last beacon, and
// every round would keep a dead one alive here. With no pva.addr_list the
// relays are still pinged at start.
func TestTrustedRelaysPinged(t *testing.T) {
	dest, pings := udpSink(t)
	c := testConfig(t, dest)
	c.Discovery.Interval = time.Minute
	c.Access.TrustedRelays = []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32"), netip.MustParsePrefix("10.9.0.0/16")}
	d, clk := startFake(t, c, nil)
	relay := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), c.PVA.BroadcastPort)
	if got := d.relayPings(c); !slices.Equal(got, []netip.AddrPort{relay}) {
		t.Fatalf("relays pinged %v, want only %v (a prefix is no relay's address)", got, relay)
	}
	sent := func() uint64 { return d.UDP.ClientSearches() }
	if n := sent(); n != 2 || pings(300*time.Millisecond) != 1 {
		t.Fatalf("%d pings sent at start, want 2 (addr_list and the relay)", n)
	}
	for range 3 {
		clk.Advance(time.Minute)
	}
	if n := sent(); n != 5 || pings(300*time.Millisecond) != 3 {
		t.Fatalf("%d pings after three intervals, want 5 (addr_list only)", n)
	}
	next := *c
	next.Access.TrustedRelays = append(slices.Clone(c.Access.TrustedRelays), netip.MustParsePrefix("127.0.0.3/32"))
	d.Reload(&next)
	if n := sent(); n != 8 || d.discoveries[discoverReload].Load() != 1 {
		t.Fatalf("%d pings after a reload added a relay, want 8 (addr_list and both relays again)", n)
	}

	// With no addr_list, the relays alone make a start-up round.
	c = testConfig(t)
	c.Search.DiscoveryAtStart = true
	c.Access.TrustedRelays = []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}
	d, _ = startFake(t, c, nil)
	if n := d.UDP.ClientSearches(); n != 1 || d.discoveries[discoverStart].Load() != 1 {
		t.Fatalf("%d pings at start with only a relay, want 1", n)
	}
}
