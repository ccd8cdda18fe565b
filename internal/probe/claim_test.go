package probe

import (
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// Forged beacons alternating two GUIDs keep a restart claim pending at the
// endpoint of a server that answers no TCP ping (pvAccessCPP). Its watch
// connection ends by silence (a network blip) and is made again: nothing
// proved the server gone, so the reconnect lists it under the GUID it was
// proven with, not under the claim.
func TestForgedClaimsSurviveNoPingReconnect(t *testing.T) {
	// The watch ends by silence after two echo intervals; a shorter echo
	// lost the listing's own connection on a loaded machine (a stall
	// longer than the idle timeout).
	const echo = time.Second
	srv := startServer(t, sim.Options{NoPing: true}, "x", "y")
	k := newSink()
	c := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: c, Sink: k, EchoInterval: echo, PingWait: 20 * time.Millisecond})
	g := srv.GUID()
	p.Probe(g, srv.Addr(), ReasonNew)
	if r := k.next(t, "listed", 5*time.Second); r.guid != g {
		t.Fatalf("listed %+v", r)
	}
	forged := []pva.GUID{{0xF0, 1}, {0xF0, 2}}
	idle := func() bool { ss := p.Servers(); return len(ss) == 1 && ss[0].State != StateProbing }
	n := 0
	forge := func() { p.Probe(forged[n%2], srv.Addr(), ReasonChanged); n++ }
	// Two beacons a second for a while: each step's check is refuted.
	for range 6 {
		c.Advance(500 * time.Millisecond)
		forge()
		testutil.WaitFor(t, 5*time.Second, "the prober to settle", idle)
	}
	if p.stats.VerifyRefuted.Load() == 0 {
		t.Fatal("no claim was checked")
	}
	forge() // a claim is pending when the blip comes
	srv.Mute()
	if r := k.next(t, "lost", 4*echo+5*time.Second); r.guid != g {
		t.Fatalf("lost %+v", r)
	}
	srv.Unmute()
	forge() // and one arrives after the watch ended
	c.Advance(2 * time.Second)
	r := k.next(t, "listed", 5*time.Second)
	if r.guid != g || !slices.Equal(r.names, []string{"x", "y"}) {
		t.Fatalf("after the reconnect: listed %v %v, want the proven %v", r.guid, r.names, g)
	}
	testutil.WaitFor(t, 5*time.Second, "the prober to settle", idle)
	if ss := p.Servers(); ss[0].GUID != g {
		t.Fatalf("watching %v, want %v", ss[0].GUID, g)
	}
}

// A no-ping server that restarts with a new GUID: its watch is closed by
// the server (proof the old instance is gone), and the new instance's
// first beacon is taken at once, whether it comes before the reconnect or
// after it. One that answers a search for a name it listed is known by
// that answer on the reconnect already.
func TestNoPingRestartFollowed(t *testing.T) {
	for _, tc := range []struct {
		beaconFirst bool
		opt         sim.Options
	}{{true, sim.Options{NoTCPSearch: true}}, {false, sim.Options{NoTCPSearch: true}}, {true, sim.Options{NoPing: true}}, {false, sim.Options{NoPing: true}}} {
		beaconFirst, named := tc.beaconFirst, tc.opt.NoPing
		a := startServer(t, tc.opt, "x")
		b := startServer(t, tc.opt, "z")
		var cur atomic.Pointer[testServer]
		cur.Store(&a)
		k := newSink()
		c := clock.NewFake(time.Time{})
		p := newProber(t, Options{Clock: c, Sink: k, Dial: swapDial(&cur), PingWait: 20 * time.Millisecond})
		ep := a.Addr()
		p.Probe(a.GUID(), ep, ReasonNew)
		k.next(t, "listed", 5*time.Second)
		cur.Store(&b)
		a.CloseConns()
		if r := k.next(t, "lost", 5*time.Second); r.guid != a.GUID() {
			t.Fatalf("lost %+v", r)
		}
		c.Advance(10 * time.Second)
		switch {
		case beaconFirst:
			p.Probe(b.GUID(), ep, ReasonChanged)
		case named:
			// The reconnect's search for a listed name proves the new GUID.
			if r := k.next(t, "listed", 5*time.Second); r.guid != b.GUID() || !slices.Equal(r.names, []string{"z"}) {
				t.Fatalf("reconnect listed %+v, want the new instance", r)
			}
			continue
		default:
			// The reconnect lists the endpoint before any beacon says who
			// is there now: under the GUID known.
			if r := k.next(t, "listed", 5*time.Second); r.guid != a.GUID() {
				t.Fatalf("reconnect listed %+v", r)
			}
			p.Probe(b.GUID(), ep, ReasonChanged)
		}
		if r := k.next(t, "listed", 5*time.Second); r.guid != b.GUID() || !slices.Equal(r.names, []string{"z"}) {
			t.Fatalf("beacon first %v: listed %+v, want the new instance", beaconFirst, r)
		}
	}
}

// udpPings is the daemon's client socket for a test: it gives the prober a
// reply port for its pings and hands the answers heard there back.
func udpPings(t *testing.T, p *atomic.Pointer[Prober]) func() uint16 {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			h, payload, _, err := pva.SplitMessage(buf[:n])
			var m pva.SearchResponse
			if pr := p.Load(); pr != nil && err == nil && h.Command == pva.CmdSearchResponse && m.Decode(payload, h.BigEndian()) == nil {
				pr.PingAnswer(from, &m)
			}
		}
	}()
	port := uint16(c.LocalAddr().(*net.UDPAddr).Port)
	return func() uint16 { return port }
}

// A server that answers the TCP ping over UDP, as pvAccessCPP does, to the
// reply port the ping carries: the answer echoes the ping's random
// sequence ID and proves the GUID. A static server gets its own GUID, and a
// forged claim made after the server was proven gone (its watch closed)
// does not name the instance that answers the reconnect.
func TestPingAnsweredOverUDPProvesGUID(t *testing.T) {
	srv := startServer(t, sim.Options{TCPSearchOverUDP: true}, "x")
	k := newSink()
	c := clock.NewFake(time.Time{})
	var pp atomic.Pointer[Prober]
	p := newProber(t, Options{Clock: c, Sink: k, PingWait: 2 * time.Second, PingPort: udpPings(t, &pp)})
	pp.Store(p)
	p.SetStatic([]netip.AddrPort{srv.Addr()})
	if r := k.next(t, "listed", 5*time.Second); r.guid != srv.GUID() {
		t.Fatalf("static server listed as %v, want its own GUID %v (answered over UDP)", r.guid, srv.GUID())
	}
	srv.CloseConns()
	k.next(t, "lost", 5*time.Second)
	p.Probe(pva.GUID{0xF0, 9}, srv.Addr(), ReasonChanged) // forged, in the window
	c.Advance(2 * time.Second)
	if r := k.next(t, "listed", 5*time.Second); r.guid != srv.GUID() {
		t.Fatalf("after the reconnect listed as %v, want %v", r.guid, srv.GUID())
	}
	if p.stats.PingsOverUDP.Load() < 2 {
		t.Fatalf("stats %+v", metrics.Sprint(&p.stats))
	}
	// A datagram that does not echo a ping is not taken.
	if p.PingAnswer(srv.Addr(), &pva.SearchResponse{GUID: pva.GUID{1}, Seq: 12345}) {
		t.Fatal("an answer to no ping was taken")
	}
}

// A server that answers no empty TCP search (the discovery ping) still
// answers a TCP search for a name it listed, with its GUID: that proves
// who it is as the ping would. Forged beacons alternating two GUIDs, and
// one drop of its connection (the server closed it: proof the old
// instance is gone, the window in which a claim is taken without a ping
// answer), do not make the reconnect list it under a forged GUID (issue
// 39, row 11: clients were told badbad…001).
func TestNamedSearchProvesGUIDAfterDrop(t *testing.T) {
	srv := startServer(t, sim.Options{NoPing: true}, "x", "y")
	k := newSink()
	c := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: c, Sink: k, PingWait: 200 * time.Millisecond})
	g := srv.GUID()
	p.Probe(g, srv.Addr(), ReasonNew)
	if r := k.next(t, "listed", 5*time.Second); r.guid != g {
		t.Fatalf("listed %+v", r)
	}
	forged := []pva.GUID{{0xba, 0xdb, 0xad, 0, 0, 0, 0, 0, 0, 0, 0, 1}, {0xba, 0xdb, 0xad, 0, 0, 0, 0, 0, 0, 0, 0, 2}}
	idle := func() bool { ss := p.Servers(); return len(ss) == 1 && ss[0].State != StateProbing }
	n := 0
	forge := func() { p.Probe(forged[n%2], srv.Addr(), ReasonChanged); n++ }
	for range 4 {
		c.Advance(500 * time.Millisecond)
		forge()
		testutil.WaitFor(t, 5*time.Second, "the prober to settle", idle)
	}
	// A forge deferred to the end of its hint step is probed then; by then
	// the claim it carried may be gone (refuted, or dropped with the
	// watch), and the probe is a plain re-listing on the watch, reported
	// Listed. Whether the next forge lands before that probe reads the
	// claim (a check, no report) or after it (a re-listing) is up to the
	// scheduler: such listings may come before the drop's Lost, and must
	// name the real GUID.
	lost := func() {
		t.Helper()
		for {
			r := k.next(t, "", 5*time.Second)
			if r.guid != g {
				t.Fatalf("%s as %v, want %v (the proven GUID)", r.kind, r.guid, g)
			}
			switch r.kind {
			case "lost":
				return
			case "listed":
			default:
				t.Fatalf("got %+v, want lost", r)
			}
		}
	}
	srv.CloseConns()
	lost()
	forge() // in the window after the drop
	for i := 0; ; i++ {
		c.Advance(2 * time.Second)
		r := k.next(t, "listed", 5*time.Second)
		if r.guid != g {
			t.Fatalf("after the drop listed as %v, want the GUID the server answers a named search with, %v", r.guid, g)
		}
		if i == 2 {
			break
		}
		c.Advance(500 * time.Millisecond)
		forge()
		testutil.WaitFor(t, 5*time.Second, "the prober to settle", idle)
		srv.CloseConns()
		lost()
		forge()
	}
	testutil.WaitFor(t, 5*time.Second, "the prober to settle", idle)
	if ss := p.Servers(); ss[0].GUID != g {
		t.Fatalf("watching %v, want %v", ss[0].GUID, g)
	}
}
