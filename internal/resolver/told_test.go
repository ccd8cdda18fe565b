package resolver

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

// udpSink records the UDP re-answers.
type udpSink struct {
	got []struct {
		d UDPDest
		g Group
	}
}

func (s *udpSink) sink(d UDPDest, g Group) int {
	s.got = append(s.got, struct {
		d UDPDest
		g Group
	}{d, g})
	return len(g.CIDs)
}

// toldBoth answers q to a TCP client and to a UDP reply address, as the
// search paths do, and remembers both answers.
func toldBoth(f *fixture, cl *Client, to UDPDest, q ...string) {
	sq := query(q...)
	var b Batch
	f.res.Lookup(sq, &b)
	for gi := range b.Groups {
		cl.Told(sq, &b, gi, OfferTCP)
		f.res.ToldUDP(to, sq, &b, gi, b.Groups[gi].CIDs, OfferTCP)
	}
}

// The restart fan-out: clients told server 1 for names get, without
// searching again, an answer for the same CIDs naming the server that
// now holds them, once server 1 is gone and the new instance is listed —
// whether the loss or the listing comes first — and only for the names
// the new instance claims.
func TestReanswerAfterRestart(t *testing.T) {
	for _, lostFirst := range []bool{true, false} {
		f := newFixture(t, registry.Options{}, Options{})
		var tcp pushes
		var udp udpSink
		f.res.SetUDPSink(udp.sink)
		f.reg.ReplaceNames(guid(1), []string{"ioc:a", "ioc:b", "ioc:c"}, registry.SourceProbe)
		cl := f.res.NewClient(tcp.push)
		to := UDPDest{To: netip.MustParseAddrPort("10.0.0.9:40001"), From: netip.MustParseAddr("10.0.0.1"), Pin: 3}
		toldBoth(f, cl, to, "ioc:a", "ioc:b", "ioc:c")
		f.fc.Advance(5 * time.Second)
		if lostFirst {
			f.reg.RemoveServer(guid(1))
		}
		// The new instance: a new GUID at the same endpoint, listing two
		// of the three names.
		if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(9), Addr: addr(1)}, []string{"ioc:a", "ioc:c"}, registry.SourceProbe); err != nil {
			t.Fatal(err)
		}
		want := []uint32{0x12345678, 0x12345678 + 2}
		gs := tcp.take()
		if len(gs) != 1 || gs[0].Server.GUID != guid(9) || gs[0].Server.Addr != addr(1) || !slices.Equal(gs[0].CIDs, want) {
			t.Fatalf("lost first %v: TCP re-answers %+v, want CIDs %x naming the new GUID", lostFirst, gs, want)
		}
		if len(udp.got) != 1 || udp.got[0].d != to || udp.got[0].g.Server.GUID != guid(9) || !slices.Equal(udp.got[0].g.CIDs, want) {
			t.Fatalf("lost first %v: UDP re-answers %+v", lostFirst, udp.got)
		}
		if st := f.res.Stats(); f.res.st.reTCP.Load() != 2 || f.res.st.reUDP.Load() != 2 || st.Told != 4 {
			t.Fatalf("stats %+v: want 2 re-answers each way, ioc:b's two answers still remembered and the connection's two re-answers remembered anew", st)
		}
		// The next restart: the connection, which a Phoebus client does
		// not search on again once connected, is re-answered again, naming
		// the newest instance; the UDP reply address is not (its re-answer
		// was paid once, and a UDP client searches again on its own).
		udp.got = nil
		f.reg.Listed(registry.ServerInfo{GUID: guid(10), Addr: addr(1)}, []string{"ioc:a", "ioc:c"}, registry.SourceProbe)
		if gs := tcp.take(); len(gs) != 1 || gs[0].Server.GUID != guid(10) || !slices.Equal(gs[0].CIDs, want) {
			t.Fatalf("lost first %v: second restart's TCP re-answers %+v, want CIDs %x naming GUID 10", lostFirst, gs, want)
		}
		if len(udp.got) != 0 {
			t.Fatalf("lost first %v: UDP re-answered twice: %+v", lostFirst, udp.got)
		}
	}
}

// An answer older than ToldTTL is not repeated; an answer naming a server
// still registered is never repeated (the client may be connected to it:
// another GUID for a connected channel is a duplicate to PVXS and
// Phoebus), even when another server takes the name over.
func TestReanswerOnlyRecentAndOnlyForGoneServers(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	var tcp pushes
	var udp udpSink
	f.res.SetUDPSink(udp.sink)
	f.reg.ReplaceNames(guid(1), []string{"old:a"}, registry.SourceProbe)
	f.reg.ReplaceNames(guid(2), []string{"live:a"}, registry.SourceProbe)
	cl := f.res.NewClient(tcp.push)
	to := UDPDest{To: netip.MustParseAddrPort("10.0.0.9:40001")}
	toldBoth(f, cl, to, "old:a")
	f.fc.Advance(ToldTTL)
	toldBoth(f, cl, to, "live:a")
	f.reg.RemoveServer(guid(1))
	// live:a passes to server 3 while server 2 stays registered.
	f.reg.ReplaceNames(guid(2), nil, registry.SourceProbe)
	f.reg.ReplaceNames(guid(3), []string{"old:a", "live:a"}, registry.SourceProbe)
	if gs := tcp.take(); len(gs) != 0 || len(udp.got) != 0 {
		t.Fatalf("re-answered %+v / %+v: want nothing (too old; server still registered)", gs, udp.got)
	}
}

// A client that searched again and was answered (or pushed) the new
// holder is not answered a second time; a closed connection is forgotten.
func TestReanswerSkipsClientsAlreadyAnswered(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	var tcp pushes
	f.reg.ReplaceNames(guid(1), []string{"x:a"}, registry.SourceProbe)
	cl := f.res.NewClient(tcp.push)
	gone := f.res.NewClient(func(Group) { t.Error("push to a closed connection") })
	toldBoth(f, cl, UDPDest{To: netip.MustParseAddrPort("10.0.0.9:1")}, "x:a")
	toldBoth(f, gone, UDPDest{To: netip.MustParseAddrPort("10.0.0.9:2")}, "x:a")
	gone.Close()
	f.reg.RemoveServer(guid(1))
	// The client searches again: nobody holds x:a now, so it waits.
	q := query("x:a")
	var b Batch
	f.res.Lookup(q, &b)
	cl.Wait(q, b.Missing, OfferTCP)
	f.reg.Listed(registry.ServerInfo{GUID: guid(9), Addr: addr(1)}, []string{"x:a"}, registry.SourceProbe)
	if gs := tcp.take(); len(gs) != 1 || gs[0].Server.GUID != guid(9) {
		t.Fatalf("pushes %+v: want the waiter's one push, no re-answer beside it", gs)
	}
	if f.res.st.reTCP.Load() != 0 {
		t.Fatalf("stats %+v", metrics.Sprint(&f.res.st))
	}
}

// The memory is bounded per server and in total.
func TestToldBounded(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	to := UDPDest{To: netip.MustParseAddrPort("10.0.0.9:1")}
	servers := ToldTotal/ToldPerServer + 1
	for s := 0; s < servers; s++ {
		g := guid(10 + s)
		if _, err := f.reg.UpsertServer(registry.ServerInfo{GUID: g, Addr: addr(10 + s)}); err != nil {
			t.Fatal(err)
		}
		names := make([]string, ToldPerServer+10)
		for i := range names {
			names[i] = fmt.Sprintf("s%d:%d", s, i)
		}
		f.reg.ReplaceNames(g, names, registry.SourceProbe)
		sq := query(names...)
		var b Batch
		f.res.Lookup(sq, &b)
		f.res.ToldUDP(to, sq, &b, 0, b.Groups[0].CIDs, OfferTCP)
		if s == 0 {
			if st := f.res.Stats(); st.Told != ToldPerServer || f.res.st.toldEvicted.Load() != 10 {
				t.Fatalf("%d answers remembered for one server, %d evicted, want %d and 10", st.Told, f.res.st.toldEvicted.Load(), ToldPerServer)
			}
			to.To = netip.MustParseAddrPort("10.0.0.9:2") // CIDs repeat per server
		}
		to.To = netip.AddrPortFrom(to.To.Addr(), to.To.Port()+1)
	}
	if st := f.res.Stats(); st.Told != ToldTotal || f.res.st.toldEvicted.Load() == 10 {
		t.Fatalf("%d answers remembered, %d evicted: want the bound %d and evictions at it counted", st.Told, f.res.st.toldEvicted.Load(), ToldTotal)
	}
}

// TestReanswerNeverDowngradesTLS: a TLS client told a server's TLS
// endpoint must not be re-answered, when that server restarts, with a
// row that knows no TLS endpoint yet (the new instance registered from a
// plain search-through answer, before its TLS search answered): that
// would hand it the plaintext endpoint of a server that serves TLS
// (issue 39, never downgrade). The plain client is re-answered.
func TestReanswerNeverDowngradesTLS(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	f.res.SetSearcher(&kindSearcher{})
	var tcpTLS, tcpPlain pushes
	var udp udpSink
	f.res.SetUDPSink(udp.sink)
	tlsEP := netip.AddrPortFrom(addr(7).Addr(), 5076)
	if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(7), Addr: addr(7), TLS: tlsEP}, []string{"j:a"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	secure, plain := f.res.NewClient(tcpTLS.push), f.res.NewClient(tcpPlain.push)
	to := UDPDest{To: netip.MustParseAddrPort("10.0.0.9:40001")}
	sq := query("j:a")
	var b Batch
	f.res.Lookup(sq, &b)
	secure.Told(sq, &b, 0, OfferTCP|OfferTLS)
	plain.Told(sq, &b, 0, OfferTCP)
	f.res.ToldUDP(to, sq, &b, 0, b.Groups[0].CIDs, OfferTCP|OfferTLS)
	f.reg.RemoveServer(guid(7))
	// The new instance, registered from a plain search-through answer.
	if _, err := f.reg.UpsertServer(registry.ServerInfo{GUID: guid(8), Addr: addr(7), Discovered: registry.SourceSearchThrough}); err != nil {
		t.Fatal(err)
	}
	if err := f.reg.AddNames(guid(8), []string{"j:a"}, registry.SourceSearchThrough); err != nil {
		t.Fatal(err)
	}
	for _, g := range tcpTLS.take() {
		if ep, _ := g.Server.For(g.Offer.TLS()); ep.Protocol != "tls" {
			t.Errorf("TLS client re-answered %s %v", ep.Protocol, ep.Addr)
		}
	}
	for _, u := range udp.got {
		if ep, _ := u.g.Server.For(u.g.Offer.TLS()); ep.Protocol != "tls" {
			t.Errorf("TLS UDP searcher re-answered %s %v", ep.Protocol, ep.Addr)
		}
	}
	if gs := tcpPlain.take(); len(gs) != 1 || gs[0].Server.GUID != guid(8) {
		t.Errorf("plain client re-answered %+v, want the new instance", gs)
	}
}

// TestToldProductionBounds: the memory of remembered answers at
// ToldTotal, in its worst case: every answer to a reply socket of its
// own (a spoofed search names any reply port), so each entry has its
// client's table too. docs/SECURITY.md's bounds table says what this
// measures (it said ~200 B an entry, measured ~510 B).
func TestToldProductionBounds(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	servers := ToldTotal/ToldPerServer + 1
	qs := make([][]pva.SearchName, servers)
	bs := make([]Batch, servers)
	for s := range servers {
		n := fmt.Sprintf("pv%d", s)
		if _, err := f.reg.UpsertServer(registry.ServerInfo{GUID: guid(20 + s), Addr: addr(20 + s)}); err != nil {
			t.Fatal(err)
		}
		f.reg.ReplaceNames(guid(20+s), []string{n}, registry.SourceProbe)
		qs[s] = query(n)
		f.res.Lookup(qs[s], &bs[s])
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range ToldTotal + 1000 {
		to := UDPDest{To: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)}), uint16(5076+i>>16))}
		s := i % servers
		f.res.ToldUDP(to, qs[s], &bs[s], 0, bs[s].Groups[0].CIDs, OfferTCP)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := f.res.Stats().Told; n != ToldTotal {
		t.Fatalf("%d answers remembered, want the bound %d", n, ToldTotal)
	}
	const documented = 600 // bytes an entry at most, docs/SECURITY.md (~512 B)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > documented*ToldTotal {
		t.Fatalf("%d answers take %d bytes (%d each), documented at most %d each", ToldTotal, grew, grew/ToldTotal, documented)
	} else {
		t.Logf("%d answers remembered in %d bytes (%d each)", ToldTotal, grew, grew/ToldTotal)
	}
	runtime.KeepAlive(f)
}

// TestReanswerCheckCheap: every commit that gives names a holder runs
// the fan-out, under the resolver's locks (the UDP answer path's ToldUDP
// waits for them). It asked the registry for every server remembered
// answers named, a database read each: with 20,000 such servers a
// commit held the locks ~40 ms, so a mass restart, or a hostile host
// listing names at its own endpoints, stalled every answer. A server
// still registered as it was told costs a pointer comparison: a commit's
// allocations do not grow with the servers remembered.
func TestReanswerCheckCheap(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	commit := func(i int) {
		f.reg.ReplaceNames(guid(1), []string{fmt.Sprintf("x%d", i)}, registry.SourceProbe)
	}
	i := 0
	base := testing.AllocsPerRun(20, func() { i++; commit(i) })
	const servers = 2000
	for s := range servers {
		g := guid(0)
		g[1], g[2] = byte(s>>8), byte(s)
		ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 3, byte(s >> 8), byte(s)}), 5075)
		if _, err := f.reg.UpsertServer(registry.ServerInfo{GUID: g, Addr: ap}); err != nil {
			t.Fatal(err)
		}
		n := fmt.Sprintf("s%d", s)
		f.reg.ReplaceNames(g, []string{n}, registry.SourceProbe)
		sq := query(n)
		var b Batch
		f.res.Lookup(sq, &b)
		f.res.ToldUDP(UDPDest{To: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.9"), uint16(1000+s))}, sq, &b, 0, b.Groups[0].CIDs, OfferTCP)
	}
	if n := f.res.Stats().Told; n != servers {
		t.Fatalf("%d answers remembered, want %d", n, servers)
	}
	full := testing.AllocsPerRun(20, func() { i++; commit(i) })
	if full > base+100 {
		t.Fatalf("a commit allocates %.0f times with answers naming %d servers remembered, %.0f with none: the fan-out reads the registry per server", full, servers, base)
	}
}

// A connection's answers last while it is open: a Phoebus client connects
// on its answer and never searches that name again, so a restart long
// after (past ToldTTL) is re-answered over its connection. A UDP reply
// address's answers still go after ToldTTL.
func TestConnectionAnswersOutliveToldTTL(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	var tcp pushes
	var udp udpSink
	f.res.SetUDPSink(udp.sink)
	if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(1), Addr: addr(1)}, []string{"long:a"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	cl := f.res.NewClient(tcp.push)
	toldBoth(f, cl, UDPDest{To: netip.MustParseAddrPort("10.0.0.9:40001")}, "long:a")
	for range 5 { // five TTLs; answers to others meanwhile run the expiry
		f.fc.Advance(ToldTTL)
		toldBoth(f, f.res.NewClient(func(Group) {}), UDPDest{To: netip.MustParseAddrPort("10.0.0.9:40002")}, "long:a")
	}
	if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(9), Addr: addr(1)}, []string{"long:a"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	if gs := tcp.take(); len(gs) != 1 || gs[0].Server.GUID != guid(9) {
		t.Fatalf("the connection's re-answers %+v, want one naming the new instance", gs)
	}
	for _, u := range udp.got {
		if u.d.To.Port() == 40001 {
			t.Errorf("re-answered a UDP reply address told %v ago: %+v", 5*ToldTTL, u)
		}
	}
}
