package resolver

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/registry"
)

// udpPushes records what PushUDP would have sent, by reply socket.
type udpPushes struct {
	mu sync.Mutex
	m  map[netip.AddrPort][]Group
}

func (p *udpPushes) push(to netip.AddrPort, g Group) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[netip.AddrPort][]Group{}
	}
	p.m[to] = append(p.m[to], g)
}

// A name a UDP searcher looks for and nobody listed is searched through
// on its behalf, once however often it searches again; the search
// through's answer is pushed to its reply socket, and a searcher that
// stopped searching is forgotten after WaitTTL with the name's search.
func TestUDPSearcherSearchedThroughAndAnswered(t *testing.T) {
	var pu udpPushes
	f := newFixture(t, registry.Options{}, Options{PushUDP: pu.push})
	s := &searcher{}
	f.res.SetSearcher(s)
	to := netip.MustParseAddrPort("10.0.0.7:40001")
	q := query("java:pv1", "java:pv2")
	for range 3 { // the client's retries
		f.res.WaitUDP(to, q, []int{0, 1}, OfferTCP)
	}
	if len(s.want) != 2 {
		t.Fatalf("searched through %v, want both names once", s.want)
	}
	if st := f.res.Stats(); st.Waiting != 2 || st.WaitingUDP != 2 {
		t.Fatalf("waiters %+v", st)
	}
	ep := Endpoint{GUID: guid(9), Addr: addr(9), Protocol: "tcp"}
	if n := f.res.Answer("java:pv1", false, ep); n != 1 {
		t.Fatalf("search-through answer reached %d waiters, want the UDP searcher", n)
	}
	pu.mu.Lock()
	got := pu.m[to]
	pu.mu.Unlock()
	if len(got) != 1 || got[0].Server != ep || len(got[0].CIDs) != 1 || got[0].CIDs[0] != q[0].CID {
		t.Fatalf("pushed %+v to %v, want %v for CID %#x", got, to, ep, q[0].CID)
	}
	// The other name: the searcher stops searching, and is forgotten.
	f.fc.Advance(2 * time.Minute)
	if st := f.res.Stats(); st.Waiting != 0 || st.WaitingUDP != 0 {
		t.Fatalf("waiters left after the searcher stopped: %+v", st)
	}
	if len(s.drop) != 2 {
		t.Fatalf("searches dropped %v, want both names", s.drop)
	}
	f.res.mu.Lock()
	left := len(f.res.udp)
	f.res.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d UDP searchers kept with no waiter", left)
	}
}

// A name the registry holds by the time the UDP searcher is remembered is
// not searched through; nor is anything without a Searcher
// (search.through off), even with PushUDP.
func TestUDPSearcherNeedsASearcher(t *testing.T) {
	var pu udpPushes
	f := newFixture(t, registry.Options{}, Options{PushUDP: pu.push})
	to := netip.MustParseAddrPort("10.0.0.7:40001")
	q := query("x")
	f.res.WaitUDP(to, q, []int{0}, OfferTCP)
	if st := f.res.Stats(); st.Waiting != 0 {
		t.Fatalf("a UDP searcher remembered with nothing to search for it: %+v", st)
	}
	s := &searcher{}
	f.res.SetSearcher(s)
	if err := f.reg.ReplaceNames(guid(1), []string{"x"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	f.res.WaitUDP(to, q, []int{0}, OfferTCP)
	if len(s.want) != 0 || f.res.Stats().Waiting != 0 {
		t.Fatalf("a listed name searched through: %v", s.want)
	}
}

// A flood of UDP searches for distinct unknown names, from one address
// over many reply ports, or (spoofed) from many addresses, makes pvans
// search through no more names than the bounds allow: per reply address
// resolver.DefaultMaxWaitsPerSource, in all MaxWaiters/UDPShare; and the TCP
// clients keep their room (a TCP client then still waits for every name
// up to its own bounds).
func TestUDPFloodBounded(t *testing.T) {
	const perConn, perSource, total = 1000, 1500, 40000
	f := newFixture(t, registry.Options{}, Options{MaxWaitsPerClient: perConn, MaxWaitsPerSource: perSource, MaxWaiters: total})
	s := &countingSearcher{}
	f.res.SetSearcher(s)
	for port := range 10 {
		q, miss := missingNames(fmt.Sprintf("one%d", port), 2*perConn)
		f.res.WaitUDP(netip.AddrPortFrom(netip.MustParseAddr("10.0.0.66"), uint16(40000+port)), q, miss, OfferTCP)
	}
	if s.want != perSource {
		t.Fatalf("one reply address made pvans search through %d names; bound %d", s.want, perSource)
	}
	if f.res.st.dropsSource.Load() == 0 || f.res.st.drops.Load() == 0 {
		t.Fatalf("drops not counted: %+v", metrics.Sprint(&f.res.st))
	}
	for i := range 64 { // spoofed sources
		q, miss := missingNames(fmt.Sprintf("spoof%d", i), perConn)
		f.res.WaitUDP(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i), 1}), 5076), q, miss, OfferTCP)
	}
	// Distinct names: each waiter makes one searched through, so the
	// names' share (UDPNameShare) bounds them first.
	udpMax := total / UDPShare / UDPNameShare
	st := f.res.Stats()
	if s.want != udpMax || st.WaitingUDP != int64(udpMax) || f.res.st.dropsUDP.Load() == 0 {
		t.Fatalf("UDP floods searched through %d names (%d waiters, %d refused); bound %d", s.want, st.WaitingUDP, f.res.st.dropsUDP.Load(), udpMax)
	}
	// The TCP clients' room is whole: a client from the flooded address
	// gets its per-source bound, others the rest of the total.
	cl := f.res.NewClientFrom(netip.MustParseAddr("10.0.0.66"), func(Group) {})
	q, miss := missingNames("tcp", perConn)
	cl.Wait(q, miss, OfferTCP)
	if n := cl.Waiting(); n != perConn {
		t.Fatalf("a TCP client at the flooded address holds %d waiters, want %d", n, perConn)
	}
}

// A name the access policy refuses is never searched through for a UDP
// searcher either.
func TestUDPSearcherNameAccess(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{NameAllowed: func(n []byte) bool { return string(n) != "secret:pv" }})
	s := &searcher{}
	f.res.SetSearcher(s)
	f.res.WaitUDP(netip.MustParseAddrPort("10.0.0.7:40001"), query("secret:pv", "open:pv"), []int{0, 1}, OfferTCP)
	if len(s.want) != 1 || s.want[0] != "open:pv" {
		t.Fatalf("searched through %v, want open:pv only", s.want)
	}
}

// ringSearcher is a search ring of max names (searchring.DefaultMaxChannels):
// a name wanted beyond them is refused, as searchring.Ring refuses it.
type ringSearcher struct {
	max      int
	names    map[wantKey]bool
	refused  int
	accepted map[string]bool
}

func (s *ringSearcher) Want(n string, tls bool) {
	if len(s.names) >= s.max {
		s.refused++
		return
	}
	s.names[wantKey{n, tls}] = true
	s.accepted[n] = true
}
func (s *ringSearcher) Drop(n string, tls bool) { delete(s.names, wantKey{n, tls}) }

// TestUDPFloodLeavesTheRingToTCP: the UDP searchers' share of waiters
// (10,000 at defaults) is the search ring's whole bound
// (searchring.DefaultMaxChannels, 10,000): a spoofed flood of distinct names
// from many forged sources filled the ring, and no TCP client's name
// was searched through while the flood refreshed its waiters. The names
// UDP searchers make searched through are at most half their share, so
// the ring keeps room for the TCP clients.
func TestUDPFloodLeavesTheRingToTCP(t *testing.T) {
	const total = 100_000 // tcp.waiters_total
	f := newFixture(t, registry.Options{}, Options{MaxWaitsPerClient: 10_000, MaxWaitsPerSource: 10_000, MaxWaiters: total})
	ring := &ringSearcher{max: 10_000, names: map[wantKey]bool{}, accepted: map[string]bool{}}
	f.res.SetSearcher(ring)
	for i := range 200 { // forged sources
		q, miss := missingNames(fmt.Sprintf("spoof%d", i), 1000)
		f.res.WaitUDP(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, byte(i), 1}), 5076), q, miss, OfferTCP)
	}
	cl := f.res.NewClientFrom(netip.MustParseAddr("10.0.0.5"), func(Group) {})
	q, miss := missingNames("tcp", 1000)
	cl.Wait(q, miss, OfferTCP)
	for _, sn := range q {
		if !ring.accepted[string(sn.Name)] {
			t.Fatalf("a TCP client's name %s not searched through after a UDP flood (%d names in the ring, %d refused)", sn.Name, len(ring.names), ring.refused)
		}
	}
	if f.res.st.dropsUDP.Load() == 0 {
		t.Fatalf("the flood's refused names not counted: %+v", metrics.Sprint(&f.res.st))
	}
}
