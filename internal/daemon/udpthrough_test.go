package daemon

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/insight"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// udpOnly is a client that reaches pvans only over UDP, as a pvAccessCPP
// client with EPICS_PVA_ADDR_LIST naming pvans does: no TCP connection.
type udpOnly struct {
	c   *net.UDPConn
	to  netip.AddrPort
	buf []byte
}

func newUDPOnly(t *testing.T, to netip.AddrPort) *udpOnly {
	t.Helper()
	return &udpOnly{c: udpRx(t, "127.0.0.1:0"), to: to, buf: make([]byte, 65536)}
}

// search sends one search for names (CIDs from cid0 on, in order) with
// the given reply address (invalid: "any", the datagram's source).
func (u *udpOnly) search(t *testing.T, seq, cid0 uint32, reply netip.Addr, names ...string) {
	t.Helper()
	s := &pva.Search{Seq: seq, Flags: pva.SearchUnicast, ReplyPort: rxAddr(u.c).Port(), Protocols: [][]byte{[]byte("tcp")}}
	if reply.IsValid() {
		s.ReplyAddr = pva.AddressFrom(reply)
	}
	for i, n := range names {
		s.Names = append(s.Names, pva.SearchName{CID: cid0 + uint32(i), Name: []byte(n)})
	}
	if _, err := u.c.WriteToUDPAddrPort(pva.AppendSearch(nil, pva.FlagBigEndian, s), u.to); err != nil {
		t.Fatal(err)
	}
}

// claim waits up to wait for a positive reply claiming cid.
func (u *udpOnly) claim(cid uint32, wait time.Duration) (pva.SearchResponse, bool) {
	deadline := time.Now().Add(wait)
	for {
		u.c.SetReadDeadline(deadline)
		n, _, err := u.c.ReadFromUDPAddrPort(u.buf)
		if err != nil {
			return pva.SearchResponse{}, false
		}
		h, p, _, err := pva.SplitMessage(u.buf[:n])
		if err != nil || h.Command != pva.CmdSearchResponse {
			continue
		}
		var m pva.SearchResponse
		if m.Decode(p, h.BigEndian()) != nil || !m.Found {
			continue
		}
		for _, c := range m.CIDs {
			if c == cid {
				return m, true
			}
		}
	}
}

// A server that sends no beacons and cannot be listed (as the Phoebus
// Java server: no beacons, no `server` PV), started after pvans, is found
// for a client that reaches pvans only over UDP: pvans searches its names
// through on the client's behalf, and the client gets the server's
// endpoint within a few of its own retries. Periodic discovery is off
// here: the UDP search alone must find it.
func TestBeaconlessServerStartedLateFoundOverUDP(t *testing.T) {
	sitePort := testutil.FreeUDPPort(t)
	c := testConfig(t, netip.AddrPortFrom(lo, sitePort))
	c.Discovery.Interval = 0
	d := startDaemon(t, c)
	site := startSite(t, sim.Options{UDPPort: sitePort, RPCError: "no such channel: server"}) // no BeaconDests: no beacons
	srv := site.Server(0)
	name := srv.Names[0]

	u := newUDPOnly(t, d.udpAddr())
	const cid = 0x1234
	deadline := time.Now().Add(20 * time.Second)
	for seq := uint32(1); ; seq++ {
		u.search(t, seq, cid, netip.Addr{}, name)
		if m, ok := u.claim(cid, 500*time.Millisecond); ok {
			if m.GUID != srv.GUID || m.Port != srv.TCP.Port() {
				t.Fatalf("claimed by %v port %d, want the late server %v at %v", m.GUID, m.Port, srv.GUID, srv.TCP)
			}
			t.Logf("found after %d searches", seq)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a UDP-only client never found %s of a beaconless server started after pvans (ring %+v)", name, d.Ring.Stats())
		}
	}
}

// A flood of UDP searches for distinct unknown names, with a forged reply
// address per name, makes pvans search through exactly the UDP share of
// tcp.waiters_total over resolver.UDPNameShare and no more
// (docs/SECURITY.md, "Bounds"); one reply address alone gets no more
// than resolver's per-source bound (Bounds.WaitersPerSource here).
func TestSpoofedUDPSearchThroughBounded(t *testing.T) {
	rx := udpRx(t, "127.0.0.1:0")
	c := testConfig(t, rxAddr(rx))
	c.Search.DiscoveryAtStart = false
	c.Discovery.Interval = 0
	const perSource = 3
	c.TCP.WaitersTotal = 160 // a UDP share of 16, 8 names
	d := startDaemonWith(t, c, fastAnd(func(b *Bounds) { b.WaitersPerSource = perSource }))
	u := newUDPOnly(t, d.udpAddr())

	got := map[string]bool{} // every name searched through so far
	searched := func() map[string]bool {
		for _, dg := range readSearches(rx, 2*time.Second, 500*time.Millisecond) {
			_, ns := searchNames(t, dg)
			for _, n := range ns {
				got[n] = true
			}
		}
		return got
	}
	// One reply address, 20 names.
	for i := range 20 {
		u.search(t, uint32(i), uint32(i), netip.Addr{}, "flood:one:"+string(rune('a'+i)))
	}
	if searched(); len(got) != perSource {
		t.Fatalf("one UDP source made pvans search through %d names %v; want the per-source bound %d", len(got), got, perSource)
	}
	// Forged reply addresses, one per name.
	for i := range 40 {
		u.search(t, uint32(100+i), uint32(100+i), netip.AddrFrom4([4]byte{127, 0, 2, byte(i + 1)}), "flood:spoof:"+string(rune('a'+i)))
	}
	searched()
	st := d.Resolver.Stats()
	want := c.TCP.WaitersTotal / resolver.UDPShare / resolver.UDPNameShare
	if len(got) != want {
		t.Fatalf("UDP floods made pvans search through %d names; want the UDP searchers' share of names, %d (resolver %+v)", len(got), want, st)
	}
	if st.WaitingUDP != int64(want) || count(t, d, `pvans_resolver_limit_hits_total{limit="waiters_udp"}`) == 0 {
		t.Fatalf("UDP waiters %+v", st)
	}
}

// A server that never beacons and cannot be listed, known from a
// discovery reply and the names pvans searched through for a client, is
// kept past the beacon expiry while its watch connection is up (a
// server is proven by TCP, not by beacons), and its silence is no
// "beacons stopped" anomaly: it never sent one.
func TestBeaconlessServerKeptPastExpiry(t *testing.T) {
	sitePort := testutil.FreeUDPPort(t)
	site := startSite(t, sim.Options{UDPPort: sitePort, RPCError: "no such channel: server"})
	srv := site.Server(0)
	c := testConfig(t, netip.AddrPortFrom(lo, sitePort)) // a discovery ping at start
	c.Discovery.Interval = 0
	c.Beacon.Expiry = time.Second // checked every 250 ms (beacon.CheckEvery)
	d := startDaemon(t, c)
	testutil.WaitFor(t, 10*time.Second, "the server watched after its discovery reply", func() bool {
		_, w := d.Prober.Watching(srv.TCP)
		return w
	})
	cl := query(t, d)
	if err := cl.Search(srv.Names[:2]); err != nil {
		t.Fatal(err)
	}
	waitAnswers(t, cl, 10*time.Second)
	testutil.WaitFor(t, 10*time.Second, "searched-through names registered", func() bool {
		h, ok := d.Registry.LookupName(srv.Names[1])
		return ok && h.GUID == srv.GUID
	})
	lost := count(t, d, beaconsLost)
	testutil.WaitFor(t, 10*time.Second, "the discovery sighting to expire", func() bool { return count(t, d, beaconsLost) > lost })
	time.Sleep(200 * time.Millisecond) // the event's delivery
	for _, n := range srv.Names[:2] {
		if h, ok := d.Registry.LookupName(n); !ok || h.GUID != srv.GUID {
			t.Fatalf("%s dropped at the expiry of a watched server that never beacons", n)
		}
	}
	for _, e := range d.Events.Recent(500) {
		if e.Endpoint == srv.TCP.String() && (e.Kind == "lost" || e.Kind == "anomaly: "+insight.AnomalyBeaconsStopped) {
			t.Fatalf("event %q for a watched server that never beacons: %+v", e.Kind, e)
		}
	}
}

// A UDP-only client that searched once gets the search-through answer
// pushed to its reply socket as soon as pvans finds the name, without
// searching again (inside the reflection budget its search gave).
func TestUDPSearcherAnswerPushed(t *testing.T) {
	sitePort := testutil.FreeUDPPort(t)
	c := testConfig(t, netip.AddrPortFrom(lo, sitePort))
	c.Discovery.Interval = 0
	d := startDaemon(t, c)
	site := startSite(t, sim.Options{UDPPort: sitePort, RPCError: "no such channel: server"})
	srv := site.Server(0)

	u := newUDPOnly(t, d.udpAddr())
	const cid = 0x4321
	u.search(t, 1, cid, netip.Addr{}, srv.Names[3])
	m, ok := u.claim(cid, 10*time.Second)
	if !ok {
		t.Fatalf("no answer pushed for %s to a client that searched once", srv.Names[3])
	}
	if m.GUID != srv.GUID || m.Port != srv.TCP.Port() {
		t.Fatalf("pushed %v port %d, want %v at %v", m.GUID, m.Port, srv.GUID, srv.TCP)
	}
	testutil.WaitFor(t, 5*time.Second, "the pushed reply counted", func() bool { return count(t, d, repliesPushed) == 1 })
}

// The push goes to an address named in a datagram anyone can forge: it
// is charged to the reflection account of the searches that named it,
// and not sent beyond the reflection ratio of their bytes.
func TestUDPPushWithinReflectionBudget(t *testing.T) {
	sitePort := testutil.FreeUDPPort(t)
	c := testConfig(t, netip.AddrPortFrom(lo, sitePort))
	c.Discovery.Interval = 0
	// A search's bytes pay for no reply at a ratio of 0.5.
	d := startDaemonWith(t, c, fastAnd(func(b *Bounds) { b.ReflectionRatio = 0.5 }))
	site := startSite(t, sim.Options{UDPPort: sitePort, RPCError: "no such channel: server"})
	srv := site.Server(0)

	u := newUDPOnly(t, d.udpAddr())
	u.search(t, 1, 7, netip.Addr{}, srv.Names[5])
	// The search through finds the name, then the push is refused.
	testutil.WaitFor(t, 15*time.Second, "the push refused by the reflection cap", func() bool { return count(t, d, `pvans_udp_drops_total{reason="reflection_capped"}`) > 0 })
	if _, ok := u.claim(7, 200*time.Millisecond); ok {
		t.Fatal("a push beyond the reflection budget was sent")
	}
	if n := count(t, d, repliesPushed); n != 0 {
		t.Fatalf("%d pushes counted beyond the reflection budget", n)
	}
}

// At the defaults, a server that sends no beacons and starts after pvans
// is found by the next periodic discovery round, with no client asking:
// pvans connects to it and keeps watch.
func TestDefaultDiscoveryFindsLateBeaconlessServer(t *testing.T) {
	sitePort := testutil.FreeUDPPort(t)
	c := testConfig(t, netip.AddrPortFrom(lo, sitePort))
	if c.Discovery.Interval != config.Defaults().Discovery.Interval {
		t.Fatal("testConfig changed discovery.interval")
	}
	d, clk := startFake(t, c, nil) // the start-up ping finds nothing
	site := startSite(t, sim.Options{UDPPort: sitePort, RPCError: "no such channel: server"})
	srv := site.Server(0)
	time.Sleep(100 * time.Millisecond)
	if _, w := d.Prober.Watching(srv.TCP); w {
		t.Fatal("watched before any discovery round")
	}
	clk.Advance(c.Discovery.Interval)
	testutil.WaitFor(t, 10*time.Second, "the late server watched after the periodic round", func() bool {
		_, w := d.Prober.Watching(srv.TCP)
		return w
	})
	if s, ok := d.Registry.Server(srv.GUID); !ok || s.Addr != srv.TCP {
		t.Fatalf("no registry row for the late server: %+v", s)
	}
}

// A UDP search from another pvans (a replica whose addr_list names this
// host) is its own search-through: it is not searched through again for
// it, or two instances naming each other would keep each other's
// searches alive for ever. A client's search is.
func TestReplicaSearchNotSearchedThroughAgain(t *testing.T) {
	rx := udpRx(t, "127.0.0.1:0")
	c := testConfig(t, rxAddr(rx))
	c.Discovery.Interval = 0
	d := startDaemon(t, c)
	replica := netip.MustParseAddrPort("127.0.0.5:5075")
	d.onBeaconEvent(beacon.Event{Kind: beacon.EventNew, GUID: pva.PvansGUID(pva.GUID{1, 2, 3}), Endpoint: replica, Protocol: "tcp", Via: beacon.ViaDiscovery, At: time.Now()})
	if _, ok := d.Registry.Server(pva.PvansGUID(pva.GUID{1, 2, 3})); !ok {
		t.Fatal("replica not registered")
	}
	fromReplica := &udpOnly{c: udpRx(t, "127.0.0.5:0"), to: d.udpAddr(), buf: make([]byte, 65536)}
	fromClient := &udpOnly{c: udpRx(t, "127.0.0.6:0"), to: d.udpAddr(), buf: make([]byte, 65536)}
	fromReplica.search(t, 1, 1, netip.Addr{}, "replica:wants:this")
	fromClient.search(t, 1, 1, netip.Addr{}, "client:wants:this")
	var names []string
	for _, dg := range readSearches(rx, 5*time.Second, 500*time.Millisecond) {
		_, ns := searchNames(t, dg)
		names = append(names, ns...)
	}
	if len(names) == 0 || slices.Contains(names, "replica:wants:this") || !slices.Contains(names, "client:wants:this") {
		t.Fatalf("searched through %v; want the client's name only", names)
	}
}

const (
	beaconsLost   = `pvans_beacon_events_total{kind="lost"}`
	repliesPushed = "pvans_udp_replies_pushed_total"
)
