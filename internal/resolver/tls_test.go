package resolver

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

type kindSearcher struct{ want, drop []wantKey }

func (s *kindSearcher) Want(n string, tls bool) { s.want = append(s.want, wantKey{n, tls}) }
func (s *kindSearcher) Drop(n string, tls bool) { s.drop = append(s.drop, wantKey{n, tls}) }

// TestPushFollowsTheSearch: waiters remember their search's offer; the
// search through is asked per kind ("tls" listed or not), pushes carry
// the offer they answer (Group.Offer), and a search-through answer for
// one kind answers none of the other.
func TestPushFollowsTheSearch(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	s := &kindSearcher{}
	f.res.SetSearcher(s)
	var p1, p2 pushes
	c1, c2 := f.res.NewClient(p1.push), f.res.NewClient(p2.push)
	q := query("x", "y")
	c1.Wait(q[:1], []int{0}, OfferTCP|OfferTLS) // x, offering TLS
	c1.Wait(q[1:], []int{0}, OfferTCP)          // y, plain, same connection
	c2.Wait(q[:1], []int{0}, OfferTCP)          // x, plain
	want := []wantKey{{"x", true}, {"y", false}, {"x", false}}
	if !slices.Equal(s.want, want) {
		t.Fatalf("Want %v, want %v", s.want, want)
	}

	// A search-through "tls" answer for x goes to the TLS waiter only.
	if n := f.res.Answer("x", true, Endpoint{GUID: guid(7), Addr: addr(7), Protocol: "tls"}); n != 1 {
		t.Fatalf("Answer(x, tls) answered %d waiters, want 1", n)
	}
	if g := p1.take(); len(g) != 1 || g[0].Offer != OfferTCP|OfferTLS || g[0].CIDs[0] != q[0].CID {
		t.Fatalf("TLS waiter pushed %+v", g)
	}
	if g := p2.take(); len(g) != 0 {
		t.Fatalf("plain waiter pushed a TLS answer: %+v", g)
	}
	if !slices.Equal(s.drop, []wantKey{{"x", true}}) {
		t.Fatalf("Drop %v, want only the TLS search of x", s.drop)
	}

	// The registry answers both kinds, each push marked with its own.
	f.reg.ReplaceNames(guid(1), []string{"x", "y"}, registry.SourceProbe)
	if g := p1.take(); len(g) != 1 || g[0].Offer != OfferTCP || g[0].CIDs[0] != q[1].CID {
		t.Fatalf("plain y on the TLS-searching connection pushed %+v", g)
	}
	if g := p2.take(); len(g) != 1 || g[0].Offer != OfferTCP {
		t.Fatalf("plain x pushed %+v", g)
	}
}

// TestTLSWaiterNotDowngradedByPlainFirst: issue 39 row 12. Search-through
// sends a plain and a TLS search for a name both kinds of client wait
// for; the plain answer may come first. Its TCP check then registers the
// server from that answer, which knows no TLS endpoint — and the commit
// pushed the TLS client the plaintext endpoint of a server that serves
// TLS. A TLS waiter is pushed a registry row without a TLS port only
// once a listing has settled that the server has none; until then its
// own TLS search answers it.
func TestTLSWaiterNotDowngradedByPlainFirst(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	f.res.SetSearcher(&kindSearcher{})
	g, plainEP := guid(9), addr(9)
	tlsEP := netip.AddrPortFrom(plainEP.Addr(), 5076)
	var pt, pp, pt2 pushes
	secure, plain := f.res.NewClient(pt.push), f.res.NewClient(pp.push)
	q := query("pv1")
	secure.Wait(q, []int{0}, OfferTCP|OfferTLS)
	plain.Wait(q, []int{0}, OfferTCP)

	// The plain search's answer comes first: the plain client is pushed.
	if n := f.res.Answer("pv1", false, Endpoint{GUID: g, Addr: plainEP, Protocol: "tcp"}); n != 1 {
		t.Fatalf("plain answer reached %d waiters, want 1", n)
	}
	if gs := pp.take(); len(gs) != 1 || gs[0].Offer != OfferTCP || gs[0].Server.Addr != plainEP {
		t.Fatalf("plain client pushed %+v", gs)
	}
	// Its TCP check registers the server from the plain answer.
	if _, err := f.reg.UpsertServer(registry.ServerInfo{GUID: g, Addr: plainEP, Discovered: registry.SourceSearchThrough}); err != nil {
		t.Fatal(err)
	}
	if err := f.reg.AddNames(g, []string{"pv1"}, registry.SourceSearchThrough); err != nil {
		t.Fatal(err)
	}
	if gs := pt.take(); len(gs) != 0 {
		ep, _ := gs[0].Server.For(gs[0].Offer.TLS())
		t.Fatalf("TLS client pushed %+v (%s %v) before the TLS search answered", gs, ep.Protocol, ep.Addr)
	}
	// A TLS client that starts waiting now is not pushed the row either.
	late := f.res.NewClient(pt2.push)
	late.Wait(q, []int{0}, OfferTCP|OfferTLS)
	if gs := pt2.take(); len(gs) != 0 {
		t.Fatalf("late TLS client pushed %+v before the TLS search answered", gs)
	}
	// The TLS search's answer settles it: both TLS clients get the TLS
	// endpoint.
	if n := f.res.Answer("pv1", true, Endpoint{GUID: g, Addr: tlsEP, Protocol: "tls"}); n != 2 {
		t.Fatalf("TLS answer reached %d waiters, want 2", n)
	}
	for _, p := range []*pushes{&pt, &pt2} {
		gs := p.take()
		if len(gs) != 1 || gs[0].Offer != OfferTCP|OfferTLS {
			t.Fatalf("TLS client pushed %+v", gs)
		}
		if ep, _ := gs[0].Server.For(true); ep.Protocol != "tls" || ep.Addr != tlsEP {
			t.Fatalf("TLS client pushed %s %v, want tls %v", ep.Protocol, ep.Addr, tlsEP)
		}
	}
}

// TestTLSWaiterPushedListedServer: a server whose listing settled its TLS
// endpoint — one, or none — is pushed to TLS waiters from the registry at
// once, search-through or not: its TLS endpoint if it has one, its plain
// one if the listing found none.
func TestTLSWaiterPushedListedServer(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	f.res.SetSearcher(&kindSearcher{})
	var p pushes
	c := f.res.NewClient(p.push)
	q := query("a", "b")
	c.Wait(q, []int{0, 1}, OfferTCP|OfferTLS)
	tlsEP := netip.AddrPortFrom(addr(1).Addr(), 5076)
	if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(1), Addr: addr(1), TLS: tlsEP}, []string{"a"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(2), Addr: addr(2)}, []string{"b"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	got := map[pva.GUID]Endpoint{}
	for _, g := range p.take() {
		got[g.Server.GUID], _ = g.Server.For(g.Offer.TLS())
	}
	if e := got[guid(1)]; e.Protocol != "tls" || e.Addr != tlsEP {
		t.Errorf("TLS server pushed %+v, want tls %v", e, tlsEP)
	}
	if e := got[guid(2)]; e.Protocol != "tcp" || e.Addr != addr(2) {
		t.Errorf("listed plain server pushed %+v, want tcp %v", e, addr(2))
	}
}

// TestOffersOfOneKindPushedApart: a search listing "tls" alone and one
// listing "tls" and "tcp" wait for a name as one kind (one search
// through), but each push and re-answer carries its own search's offer,
// so that a plain server is named to the second and not to the first
// (answer.Rules.Claim), as their direct answers would.
func TestOffersOfOneKindPushedApart(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	s := &kindSearcher{}
	f.res.SetSearcher(s)
	var p pushes
	c := f.res.NewClient(p.push)
	q := query("x", "x", "y", "y")
	c.Wait(q[0:1], []int{0}, OfferTLS)
	c.Wait(q[1:2], []int{0}, OfferTCP|OfferTLS)
	c.Wait(q[2:3], []int{0}, OfferTLS)
	c.Wait(q[3:4], []int{0}, OfferTCP|OfferTLS)
	if want := []wantKey{{"x", true}, {"y", true}}; !slices.Equal(s.want, want) {
		t.Fatalf("Want %v, want %v: one search through per name and kind", s.want, want)
	}
	offers := func(gs []Group) map[Offer][]uint32 {
		m := map[Offer][]uint32{}
		for _, g := range gs {
			m[g.Offer] = append(m[g.Offer], g.CIDs...)
		}
		return m
	}
	// A search-through answer (x), and a listing (y, of a server settled
	// as having no TLS).
	if n := f.res.Answer("x", true, Endpoint{GUID: guid(7), Addr: addr(7), Protocol: "tcp"}); n != 2 {
		t.Fatalf("Answer(x) answered %d waiters, want 2", n)
	}
	if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(8), Addr: addr(8)}, []string{"y"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	got := offers(p.take())
	want := map[Offer][]uint32{OfferTLS: {q[0].CID, q[2].CID}, OfferTCP | OfferTLS: {q[1].CID, q[3].CID}}
	if len(got) != 2 || !slices.Equal(got[OfferTLS], want[OfferTLS]) || !slices.Equal(got[OfferTCP|OfferTLS], want[OfferTCP|OfferTLS]) {
		t.Fatalf("pushed %v, want %v", got, want)
	}

	// Remembered answers keep the offer for the re-answer too.
	var udp udpSink
	f.res.SetUDPSink(udp.sink)
	tlsEP := netip.AddrPortFrom(addr(9).Addr(), 5076)
	if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(9), Addr: addr(9), TLS: tlsEP}, []string{"z"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	sq := query("z")
	var b Batch
	f.res.Lookup(sq, &b)
	only, both := UDPDest{To: netip.MustParseAddrPort("10.0.0.9:40001")}, UDPDest{To: netip.MustParseAddrPort("10.0.0.9:40002")}
	f.res.ToldUDP(only, sq, &b, 0, b.Groups[0].CIDs, OfferTLS)
	f.res.ToldUDP(both, sq, &b, 0, b.Groups[0].CIDs, OfferTCP|OfferTLS)
	c.Told(sq, &b, 0, OfferTLS)
	f.reg.RemoveServer(guid(9))
	if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(10), Addr: addr(9)}, []string{"z"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	re := map[UDPDest]Offer{}
	for _, u := range udp.got {
		re[u.d] = u.g.Offer
	}
	if len(re) != 2 || re[only] != OfferTLS || re[both] != OfferTCP|OfferTLS {
		t.Fatalf("UDP re-answers %+v, want each with its own offer", udp.got)
	}
	if gs := p.take(); len(gs) != 1 || gs[0].Offer != OfferTLS {
		t.Fatalf("TCP re-answer %+v, want offer %v", gs, OfferTLS)
	}
}

// TestHeldAtWaitPushedWithTheOffer: a name held by the time its waiter
// is set (listed between the lookup and Wait) is pushed at once, with
// the search's own offer as every other push: a search listing "tls"
// alone is not named the plain server (answer.Rules.Claim reads it).
func TestHeldAtWaitPushedWithTheOffer(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	f.res.SetSearcher(&kindSearcher{})
	var p pushes
	c := f.res.NewClient(p.push)
	if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(3), Addr: addr(3)}, []string{"now"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	q := query("now", "now")
	c.Wait(q[0:1], []int{0}, OfferTLS)
	c.Wait(q[1:2], []int{0}, OfferTCP|OfferTLS)
	got := map[Offer][]uint32{}
	for _, g := range p.take() {
		got[g.Offer] = append(got[g.Offer], g.CIDs...)
	}
	if len(got) != 2 || !slices.Equal(got[OfferTLS], []uint32{q[0].CID}) || !slices.Equal(got[OfferTCP|OfferTLS], []uint32{q[1].CID}) {
		t.Fatalf("pushed %v, want %v for the search listing tls alone", got, q[0].CID)
	}
}
