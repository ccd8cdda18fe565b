package relay

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
)

var guid = pva.GUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

func listen(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A beacon is relayed as a beacon, a discovery reply as a search response,
// each naming the server's own address (never "any"), to every
// destination; the rate bound and the relayable rule drop (counted).
func TestRelay(t *testing.T) {
	a, b := listen(t), listen(t)
	clk := clock.NewFake(time.Unix(0, 0))
	r := New(Options{Clock: clk})
	r.Apply(Limits{To: []netip.AddrPort{a.LocalAddr().(*net.UDPAddr).AddrPort(), b.LocalAddr().(*net.UDPAddr).AddrPort()}, PerSecond: 1, Burst: 2})
	if err := r.Open(); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ioc := netip.MustParseAddrPort("10.5.0.7:5075")
	from := netip.AddrPortFrom(ioc.Addr(), 40000) // heard from the server itself
	r.Relay(beacon.Observation{GUID: guid, Endpoint: ioc, Protocol: "tcp", ChangeCount: 7, Via: beacon.ViaBeacon, From: from})
	r.Relay(beacon.Observation{GUID: guid, Endpoint: ioc, Protocol: "tcp", Via: beacon.ViaDiscovery, From: from})
	r.Relay(beacon.Observation{GUID: guid, Endpoint: ioc, Protocol: "tcp", Via: beacon.ViaBeacon, From: from}) // beyond the burst
	lo := netip.MustParseAddrPort("127.0.0.1:5075")
	r.Relay(beacon.Observation{GUID: guid, Endpoint: lo, Protocol: "tcp", From: lo})
	r.Relay(beacon.Observation{GUID: pva.PvansGUID(guid), Endpoint: ioc, Protocol: "tcp", From: from}) // another pvans
	for _, c := range []*net.UDPConn{a, b} {
		buf := make([]byte, 512)
		for i, want := range []pva.Command{pva.CmdBeacon, pva.CmdSearchResponse} {
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, _, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				t.Fatal(err)
			}
			h, payload, _, err := pva.SplitMessage(buf[:n])
			if err != nil || h.Command != want {
				t.Fatalf("datagram %d: %v %v", i, h.Command, err)
			}
			if want == pva.CmdBeacon {
				var m pva.Beacon
				if err := m.Decode(payload, h.BigEndian()); err != nil || m.GUID != guid || m.Addr.Addr() != ioc.Addr() || m.Port != 5075 || m.ChangeCount != 7 {
					t.Fatalf("beacon %+v %v", m, err)
				}
			} else {
				var m pva.SearchResponse
				if err := m.Decode(payload, h.BigEndian()); err != nil || m.Found || len(m.CIDs) != 0 || m.Addr.Addr() != ioc.Addr() || string(m.Protocol) != "tcp" {
					t.Fatalf("discovery reply %+v %v", m, err)
				}
			}
		}
	}
	if r.sightings.Load() != 2 || r.datagrams.Load() != 4 || r.rate.Load() != 1 || r.notRelayable.Load() != 1 {
		t.Errorf("stats %+v", metrics.Sprint(&r.counters))
	}
	// The bound refills with time.
	clk.Advance(time.Second)
	r.Relay(beacon.Observation{GUID: guid, Endpoint: ioc, Protocol: "tcp", From: from})
	if r.sightings.Load() != 3 {
		t.Errorf("not relayed after a second: %+v", metrics.Sprint(&r.counters))
	}
}

// BenchmarkRelay is a relay's CPU per beacon relayed to one central pvans
// (docs/PERFORMANCE.md, "A relay's cost").
func BenchmarkRelay(b *testing.B) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := c.ReadFromUDPAddrPort(buf); err != nil {
				return
			}
		}
	}()
	r := New(Options{})
	r.Apply(Limits{To: []netip.AddrPort{c.LocalAddr().(*net.UDPAddr).AddrPort()}})
	if err := r.Open(); err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	o := beacon.Observation{GUID: guid, Endpoint: netip.MustParseAddrPort("10.5.0.7:5075"), Protocol: "tcp", Via: beacon.ViaBeacon,
		From: netip.MustParseAddrPort("10.5.0.7:5076")}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Relay(o)
	}
}

// A relay passes on only what it heard first hand: a sighting another
// relay sent (its source is the relay, not the server it names) goes no
// further, so two instances relaying to each other relay a beacon once
// each way, not until their rate bound stops them (issue 39, row 7).
func TestRelaysOnlyFirstHand(t *testing.T) {
	c := listen(t)
	r := New(Options{Clock: clock.NewFake(time.Unix(0, 0))})
	r.Apply(Limits{To: []netip.AddrPort{c.LocalAddr().(*net.UDPAddr).AddrPort()}})
	if err := r.Open(); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ioc := netip.MustParseAddrPort("10.5.0.7:5075")
	// Heard from the server itself: relayed.
	r.Relay(beacon.Observation{GUID: guid, Endpoint: ioc, Protocol: "tcp", Via: beacon.ViaBeacon, From: netip.MustParseAddrPort("10.5.0.7:40000")})
	// Heard from another relay (10.6.0.2) that names the server: not.
	for _, via := range []beacon.Via{beacon.ViaBeacon, beacon.ViaDiscovery} {
		r.Relay(beacon.Observation{GUID: guid, Endpoint: ioc, Protocol: "tcp", Via: via, From: netip.MustParseAddrPort("10.6.0.2:51234")})
	}
	if r.sightings.Load() != 1 || r.secondHand.Load() != 2 {
		t.Errorf("stats %+v: want the first-hand sighting relayed, the two relayed ones not", metrics.Sprint(&r.counters))
	}
}

// Multicast and broadcast destinations are skipped unless ToBroadcast
// says they are meant: config refuses them as written, but a relay.to
// host name can resolve to one, and a directed broadcast of this host's
// networks is known only from its interfaces. (Checked on the destination
// list: nothing is sent.)
func TestRelaySkipsBroadcastDestinations(t *testing.T) {
	central := netip.MustParseAddrPort("10.0.0.9:5076")
	directed := netip.MustParseAddrPort("10.0.0.255:5076")
	r := New(Options{Clock: clock.NewFake(time.Unix(0, 0)), Broadcast: func(a netip.Addr) bool { return a == directed.Addr() }})
	to := []netip.AddrPort{central, netip.MustParseAddrPort("224.0.1.7:5076"), netip.MustParseAddrPort("255.255.255.255:5076"),
		directed, netip.MustParseAddrPort("[ff02::1]:5076")}
	r.Apply(Limits{To: to})
	if !slices.Equal(r.to, []netip.AddrPort{central}) {
		t.Errorf("destinations %v, want only %v", r.to, central)
	}
	r.Apply(Limits{To: to, ToBroadcast: true})
	if !slices.Equal(r.to, to) {
		t.Errorf("destinations with ToBroadcast %v, want %v", r.to, to)
	}
}

// reannounceRelay is a relay to one listening destination with two
// servers heard first hand and one heard second hand.
func reannounceRelay(t *testing.T, clk *clock.Fake, l Limits) (*Relay, *net.UDPConn) {
	t.Helper()
	c := listen(t)
	l.To = []netip.AddrPort{c.LocalAddr().(*net.UDPAddr).AddrPort()}
	r := New(Options{Clock: clk})
	r.Apply(l)
	if err := r.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	for i, ep := range []string{"10.5.0.7:5075", "10.5.0.8:5075"} {
		ioc := netip.MustParseAddrPort(ep)
		r.Relay(beacon.Observation{GUID: pva.GUID{byte(i + 1)}, Endpoint: ioc, Protocol: "tcp", Via: beacon.Via(i),
			From: netip.AddrPortFrom(ioc.Addr(), 5076)})
	}
	r.Relay(beacon.Observation{GUID: guid, Endpoint: netip.MustParseAddrPort("10.5.0.9:5075"), Protocol: "tcp",
		From: netip.MustParseAddrPort("10.6.0.2:5076")}) // relayed to us: not ours to re-announce
	drain(t, c, 2) // the live relays
	return r, c
}

// drain reads n datagrams from c and returns the server endpoints they
// name; it fails if fewer come.
func drain(t *testing.T, c *net.UDPConn, n int) []netip.AddrPort {
	t.Helper()
	var got []netip.AddrPort
	buf := make([]byte, 512)
	for range n {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		k, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("after %d of %d datagrams: %v", len(got), n, err)
		}
		h, payload, _, err := pva.SplitMessage(buf[:k])
		if err != nil {
			t.Fatal(err)
		}
		switch h.Command {
		case pva.CmdBeacon:
			var m pva.Beacon
			if err := m.Decode(payload, h.BigEndian()); err != nil {
				t.Fatal(err)
			}
			got = append(got, netip.AddrPortFrom(m.Addr.Addr(), m.Port))
		case pva.CmdSearchResponse:
			var m pva.SearchResponse
			if err := m.Decode(payload, h.BigEndian()); err != nil {
				t.Fatal(err)
			}
			got = append(got, netip.AddrPortFrom(m.Addr.Addr(), m.Port))
		default:
			t.Fatalf("command %v", h.Command)
		}
	}
	slices.SortFunc(got, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return got
}

// nothing fails if a datagram reaches c within a short while.
func nothing(t *testing.T, c *net.UDPConn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, from, err := c.ReadFromUDPAddrPort(make([]byte, 512)); err == nil {
		t.Fatalf("got %d bytes from %v, want nothing", n, from)
	}
}

// A discovery ping from a relay.to destination's address gets every
// server heard first hand sent to it again, as it was relayed (issue 41:
// a central started without a snapshot knows the site at once instead of
// at each server's next beacon); once per ReannounceGap.
func TestReannounceOnPing(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	r, c := reannounceRelay(t, clk, Limits{Known: 10, Expiry: time.Minute})
	central := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 40001) // the central's client port, not its search port
	r.Pinged(central)
	want := []netip.AddrPort{netip.MustParseAddrPort("10.5.0.7:5075"), netip.MustParseAddrPort("10.5.0.8:5075")}
	if got := drain(t, c, 2); !slices.Equal(got, want) {
		t.Errorf("re-announced %v, want %v", got, want)
	}
	r.Pinged(central) // within the gap
	nothing(t, c)
	clk.Advance(ReannounceGap)
	r.Pinged(central)
	drain(t, c, 2)
	// A server not heard for beacon.expiry is forgotten.
	clk.Advance(time.Minute)
	r.Pinged(central)
	nothing(t, c)
	if r.reannounces.Load() != 3 || r.reannounced.Load() != 4 || r.pingsTooSoon.Load() != 1 || r.Known() != 0 {
		t.Errorf("stats %+v", metrics.Sprint(&r.counters))
	}
}

// A ping from an address that is not a relay.to destination sends
// nothing anywhere: the ping's source is anyone's to write, and a relay
// answering it would send its table to whoever the sender names.
func TestReannounceNotForOthers(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	r, c := reannounceRelay(t, clk, Limits{Known: 10})
	victim, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)}) // not the destination's address
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	r.Pinged(victim.LocalAddr().(*net.UDPAddr).AddrPort())
	r.Pinged(netip.MustParseAddrPort("10.9.9.9:5076"))
	nothing(t, c)
	nothing(t, victim)
	if r.pingsNotRelayTo.Load() != 2 || r.reannounces.Load() != 0 || r.reannounced.Load() != 0 {
		t.Errorf("stats %+v", metrics.Sprint(&r.counters))
	}
}

// A re-announce is paced by the relay's rate bound, shared with live
// sightings, and bounded to Known servers (the oldest heard pushed out).
func TestReannouncePacedAndBounded(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	r, c := reannounceRelay(t, clk, Limits{Known: 2, PerSecond: 1, Burst: 2})
	// A third server: the one heard longest ago (10.5.0.7) is pushed out.
	clk.Advance(2 * time.Second) // the burst is back
	ioc := netip.MustParseAddrPort("10.5.0.10:5075")
	r.Relay(beacon.Observation{GUID: pva.GUID{9}, Endpoint: ioc, Protocol: "tcp", From: netip.AddrPortFrom(ioc.Addr(), 5076)})
	drain(t, c, 1)
	r.Pinged(c.LocalAddr().(*net.UDPAddr).AddrPort())
	if got := drain(t, c, 1); len(got) != 1 {
		t.Fatal(got)
	}
	nothing(t, c) // the bound is spent: the second waits
	clk.Advance(time.Second)
	drain(t, c, 1)
	if r.Known() != 2 || r.knownEvictions.Load() != 1 || r.reannounced.Load() != 2 {
		t.Errorf("stats %+v", metrics.Sprint(&r.counters))
	}
}
