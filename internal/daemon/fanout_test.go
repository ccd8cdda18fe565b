package daemon

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/testutil"
)

// fanoutDaemon is a started daemon on a fake clock with no search
// destinations: what it answers comes only from the listings the test
// makes (probeSink.Listed, as the prober would).
func fanoutDaemon(t *testing.T, mod func(*config.Config), tune ...func(*Bounds)) (*Daemon, *clock.Fake) {
	t.Helper()
	c := testConfig(t)
	c.Search.Through = false
	if mod != nil {
		mod(c)
	}
	clk := clock.NewFake(time.Time{})
	bounds := fast
	for _, f := range tune {
		bounds = fastAnd(f)
	}
	d, err := New(c, Options{Clock: clk, TestBounds: bounds})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d, clk
}

// udpSearch sends one UDP search for names from cl, CIDs from cid0 up,
// replies to cl's own address.
func udpSearch(t *testing.T, cl *net.UDPConn, to netip.AddrPort, cid0 uint32, names ...string) {
	t.Helper()
	q := make([]pva.SearchName, len(names))
	for i, n := range names {
		q[i] = pva.SearchName{CID: cid0 + uint32(i), Name: []byte(n)}
	}
	p := pva.NewSearchPacker(rxAddr(cl).Port())
	p.Seq = 77
	err := p.Pack(q, func(b []byte) {
		if _, err := cl.WriteToUDPAddrPort(b, to); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// udpAnswers reads the positive search responses arriving at cl until it
// has want CIDs or the (real-time, generous) deadline passes: CID → the
// response naming it.
func udpAnswers(t *testing.T, cl *net.UDPConn, want int, within time.Duration) map[uint32]pva.SearchResponse {
	t.Helper()
	got := map[uint32]pva.SearchResponse{}
	buf := make([]byte, 65536)
	cl.SetReadDeadline(time.Now().Add(within))
	for len(got) < want {
		n, _, err := cl.ReadFromUDPAddrPort(buf)
		if err != nil {
			return got
		}
		h, p, _, err := pva.SplitMessage(buf[:n])
		var m pva.SearchResponse
		if err != nil || h.Command != pva.CmdSearchResponse || m.Decode(p, h.BigEndian()) != nil || !m.Found {
			continue
		}
		for _, c := range m.CIDs {
			got[c] = m
		}
	}
	return got
}

// The restart fan-out (issue 38): a UDP client and a TCP client were told
// endpoint A for names; the server at A restarts (a new GUID, on a new
// port) and is listed again; each client gets, without searching again,
// a search response for its original CIDs naming the new instance, with
// the fake clock moved by no more than a second.
func TestRestartFanOut(t *testing.T) {
	for _, lostFirst := range []bool{true, false} {
		d, clk := fanoutDaemon(t, nil)
		old, nu := pva.GUID{0xA1, 1}, pva.GUID{0xB2, 2}
		// Lost first, the new instance may come back anywhere (here on
		// another port); otherwise its listing at the old endpoint is what
		// replaces the old instance (the death not seen yet).
		epA := netip.MustParseAddrPort("127.0.0.1:5999")
		epB := epA
		if lostFirst {
			epB = netip.MustParseAddrPort("127.0.0.1:6001")
		}
		names := []string{"fan:a", "fan:b", "fan:c"}
		probeSink{d}.Listed(old, epA, names, probe.Info{})

		ucl := udpRx(t, "127.0.0.1:0")
		udpSearch(t, ucl, d.udpAddr(), 40, names...)
		if got := udpAnswers(t, ucl, 3, 5*time.Second); len(got) != 3 || got[40].GUID != old {
			t.Fatalf("UDP client told %+v, want the old server for 3 CIDs", got)
		}
		tcl := query(t, d)
		if err := tcl.Search(names[:2]); err != nil {
			t.Fatal(err)
		}
		if a := waitAnswers(t, tcl, 5*time.Second); len(a) != 2 || a[0].GUID != old {
			t.Fatalf("TCP client told %+v", a)
		}
		clk.Advance(3 * time.Second)
		if lostFirst {
			probeSink{d}.Lost(old, epA, "watch closed")
		}
		tcl.Forget(names...)
		probeSink{d}.Listed(nu, epB, names, probe.Info{})
		for range 10 { // the simulated second after the listing
			clk.Advance(100 * time.Millisecond)
		}
		got := udpAnswers(t, ucl, 3, 5*time.Second)
		for cid := uint32(40); cid < 43; cid++ {
			if m, ok := got[cid]; !ok || m.GUID != nu || m.Port != epB.Port() {
				t.Fatalf("lost first %v: UDP client's CID %d re-answered %+v; want GUID %v port %d", lostFirst, cid, m, nu, epB.Port())
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a, unresolved, _ := tcl.Wait(ctx)
		cancel()
		if len(unresolved) != 0 || len(a) != 2 {
			t.Fatalf("lost first %v: TCP client re-answered %+v, still waiting for %v", lostFirst, a, unresolved)
		}
		for i, x := range a {
			if x.GUID != nu || x.Endpoint != epB || x.CID != nsclient.FirstCID+uint32(i) {
				t.Fatalf("lost first %v: TCP re-answer %+v, want GUID %v at %v for its original CID", lostFirst, x, nu, epB)
			}
		}
		if count(t, d, reanswersUDP) != 3 || count(t, d, reanswersTCP) != 2 {
			t.Fatalf("re-answers udp %d tcp %d; want 3 and 2", count(t, d, reanswersUDP), count(t, d, reanswersTCP))
		}
	}
}

// A client whose answer is older than resolver.ToldTTL when the new
// instance is listed gets nothing: it has searched again on its own by
// then, or was connected and searched again when it lost the server.
func TestRestartFanOutForgetsOldAnswers(t *testing.T) {
	d, clk := fanoutDaemon(t, nil)
	old, nu := pva.GUID{0xA1, 1}, pva.GUID{0xB2, 2}
	ep := netip.MustParseAddrPort("127.0.0.1:5999")
	probeSink{d}.Listed(old, ep, []string{"fan:old"}, probe.Info{})
	ucl := udpRx(t, "127.0.0.1:0")
	udpSearch(t, ucl, d.udpAddr(), 40, "fan:old")
	if got := udpAnswers(t, ucl, 1, 5*time.Second); len(got) != 1 {
		t.Fatal("not answered")
	}
	clk.Advance(resolver.ToldTTL)
	probeSink{d}.Lost(old, ep, "watch closed")
	probeSink{d}.Listed(nu, ep, []string{"fan:old"}, probe.Info{})
	clk.Advance(time.Second)
	if got := udpAnswers(t, ucl, 1, 300*time.Millisecond); len(got) != 0 {
		t.Fatalf("re-answered an answer older than %s: %+v", resolver.ToldTTL, got)
	}
	if count(t, d, reanswersUDP) != 0 {
		t.Fatalf("re-answers udp %d; want 0", count(t, d, reanswersUDP))
	}
}

// A spoofed reply address: the re-answers a restart sends it stay within
// the reflection cap of the searches that named it — answers and
// re-answers together are at most the reflection ratio times the
// search bytes credited to that address. At a ratio of 1 a one-name
// search pays for its answer (53 bytes for 54) but not for a re-answer
// too: without the reservation the restart would push the victim's bytes
// over the cap.
func TestRestartFanOutWithinReflectionCap(t *testing.T) {
	const ratio = 1
	d, clk := fanoutDaemon(t, func(c *config.Config) {
		c.UDP.ClientReplyNamesPerSecond = 0 // every answer goes at once: the budget is all spent
	}, func(b *Bounds) {
		b.ReflectionRatio = ratio
		b.ReflectionWindow = time.Hour // the whole test is one window
	})
	old, nu := pva.GUID{0xA1, 1}, pva.GUID{0xB2, 2}
	ep := netip.MustParseAddrPort("127.0.0.1:5999")
	var names []string
	for i := range 400 {
		names = append(names, "spoof:"+string(rune('a'+i%26))+string(rune('A'+i/26)))
	}
	probeSink{d}.Listed(old, ep, names, probe.Info{})
	victim := udpRx(t, "127.0.0.1:0")
	attacker := udpRx(t, "127.0.0.1:0")
	// The victim reads all along: its receive buffer must not be what
	// bounds the bytes counted.
	var got atomic.Int64
	go func() {
		buf := make([]byte, 65536)
		for {
			k, _, err := victim.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			got.Add(int64(k))
		}
	}()
	// quiet waits until nothing more has arrived for a while.
	quiet := func() int {
		last := int64(-1)
		for got.Load() != last {
			last = got.Load()
			time.Sleep(200 * time.Millisecond)
		}
		return int(last)
	}
	// Searches sent by the attacker naming the victim as reply address,
	// one name each (the costliest answer per search byte).
	var sent int
	for i, n := range names {
		if i%100 == 0 {
			// In rounds the victim's receive buffer takes: what is
			// counted is what pvans sent, not what a kernel dropped.
			quiet()
		}
		q := []pva.SearchName{{CID: uint32(i), Name: []byte(n)}}
		p := pva.NewSearchPacker(rxAddr(victim).Port())
		p.ReplyAddr = pva.AddressFrom(rxAddr(victim).Addr())
		p.Pack(q, func(b []byte) {
			sent += len(b)
			attacker.WriteToUDPAddrPort(b, d.udpAddr())
		})
	}
	testutil.WaitFor(t, 5*time.Second, "searches handled", func() bool { return count(t, d, "pvans_udp_searches_total") == uint64(len(names)) })
	if n := count(t, d, "pvans_udp_replies_total"); n != uint64(len(names)) {
		t.Fatalf("%d of %d searches answered: the budget is not what the test assumes", n, len(names))
	}
	answered := quiet()
	probeSink{d}.Lost(old, ep, "watch closed")
	probeSink{d}.Listed(nu, ep, names, probe.Info{})
	for range 20 {
		clk.Advance(100 * time.Millisecond)
	}
	reanswered := quiet() - answered
	t.Logf("searches %d bytes; answers %d bytes, re-answers %d bytes (%d CIDs)", sent, answered, reanswered, count(t, d, reanswersUDP))
	if answered == 0 {
		t.Fatal("no answer reached the victim: the test shows nothing")
	}
	if answered+reanswered > ratio*sent {
		t.Fatalf("victim got %d bytes for %d bytes of spoofed searches: over the ratio %d", answered+reanswered, sent, ratio)
	}
}

// With pvans's own beacons on, a restart makes pvans beacon at once —
// without the fake clock moving to its next scheduled beacon — with its
// change count moved, for clients that react to beacons.
func TestRestartBeaconsAtOnce(t *testing.T) {
	rx := udpRx(t, "127.0.0.1:0")
	d, clk := fanoutDaemon(t, func(c *config.Config) {
		c.UDP.SendBeacons = true
		c.PVA.BeaconAddrList = []config.Endpoint{config.EndpointOf(rxAddr(rx))}
	})
	beacon := func(within time.Duration) (uint16, bool) {
		buf := make([]byte, 2048)
		rx.SetReadDeadline(time.Now().Add(within))
		for {
			n, _, err := rx.ReadFromUDPAddrPort(buf)
			if err != nil {
				return 0, false
			}
			h, p, _, err := pva.SplitMessage(buf[:n])
			var b pva.Beacon
			if err == nil && h.Command == pva.CmdBeacon && b.Decode(p, h.BigEndian()) == nil && b.GUID == d.GUID() {
				return b.ChangeCount, true
			}
		}
	}
	c0, ok := beacon(5 * time.Second) // the first beacon, at start
	if !ok {
		t.Fatal("no beacon at start")
	}
	ep := netip.MustParseAddrPort("127.0.0.1:5999")
	probeSink{d}.Listed(pva.GUID{0xA1}, ep, []string{"b:a"}, probe.Info{})
	clk.Advance(2 * time.Second) // no scheduled beacon is due yet (the next is 15 s after start)
	if _, ok := beacon(200 * time.Millisecond); ok {
		t.Fatal("a beacon for a server merely listed: only a restart prompts one")
	}
	probeSink{d}.Listed(pva.GUID{0xB2}, ep, []string{"b:a"}, probe.Info{})
	c1, ok := beacon(5 * time.Second)
	if !ok || c1 == c0 {
		t.Fatalf("after the restart: beacon %v, change count %d (was %d); want one at once with the count moved", ok, c1, c0)
	}
}

const (
	reanswersTCP = `pvans_resolver_reanswers_total{via="tcp"}`
	reanswersUDP = `pvans_resolver_reanswers_total{via="udp"}`
)
