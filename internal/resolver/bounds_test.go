package resolver

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

type countingSearcher struct{ want, drop int }

func (s *countingSearcher) Want(string, bool) { s.want++ }
func (s *countingSearcher) Drop(string, bool) { s.drop++ }

func missingNames(prefix string, n int) ([]pva.SearchName, []int) {
	q := make([]pva.SearchName, n)
	miss := make([]int, n)
	for i := range q {
		q[i] = pva.SearchName{CID: uint32(i), Name: []byte(fmt.Sprintf("%s:missing:%d", prefix, i))}
		miss[i] = i
	}
	return q, miss
}

// TestWaitersBoundedGloballyAndPerSource is the issue-14 row "six TCP
// connections send searches for 600,000 distinct missing names": waiters
// are bounded in total and per source address, not only per connection,
// so many connections from one host cannot fill the table, and a
// well-behaved client elsewhere still gets its waiter (and its push).
func TestWaitersBoundedGloballyAndPerSource(t *testing.T) {
	const perConn, perSource, total = 1000, 1500, 2500
	f := newFixture(t, registry.Options{}, Options{MaxWaitsPerClient: perConn, MaxWaitsPerSource: perSource, MaxWaiters: total})
	s := &countingSearcher{}
	f.res.SetSearcher(s)
	attacker := netip.MustParseAddr("10.0.0.66")
	for c := 0; c < 6; c++ {
		cl := f.res.NewClientFrom(attacker, func(Group) {})
		q, miss := missingNames(fmt.Sprintf("atk%d", c), 2*perConn)
		cl.Wait(q, miss, OfferTCP)
	}
	st := f.res.Stats()
	if st.Waiting != perSource {
		t.Fatalf("one source holds %d waiters over 6 connections; want the per-source bound %d", st.Waiting, perSource)
	}
	if f.res.st.dropsSource.Load() == 0 {
		t.Fatalf("per-source drops not counted: %+v", st)
	}
	// Other sources fill up to the global bound.
	for i := 0; i < 4; i++ {
		cl := f.res.NewClientFrom(netip.AddrFrom4([4]byte{10, 0, 1, byte(i)}), func(Group) {})
		q, miss := missingNames(fmt.Sprintf("other%d", i), perConn)
		cl.Wait(q, miss, OfferTCP)
	}
	st = f.res.Stats()
	if st.Waiting != total || f.res.st.dropsTotal.Load() == 0 {
		t.Fatalf("waiters %d (drops at the global bound %d); want exactly %d", st.Waiting, f.res.st.dropsTotal.Load(), total)
	}
	if s.want != total {
		t.Fatalf("search-through asked for %d names; want one per waited name, %d", s.want, total)
	}
}

// TestWaiterSlotsFreedOnClose: closing a connection gives its source's
// share back.
func TestWaiterSlotsFreedOnClose(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{MaxWaitsPerSource: 10, MaxWaiters: 100})
	src := netip.MustParseAddr("10.0.0.7")
	cl := f.res.NewClientFrom(src, func(Group) {})
	q, miss := missingNames("a", 10)
	cl.Wait(q, miss, OfferTCP)
	cl.Close()
	cl2 := f.res.NewClientFrom(src, func(Group) {})
	q, miss = missingNames("b", 10)
	cl2.Wait(q, miss, OfferTCP)
	if st := f.res.Stats(); st.Waiting != 10 || f.res.st.dropsSource.Load() != 0 {
		t.Fatalf("after close and reconnect: %+v", st)
	}
}

// TestNameLengthBound is the issue-14 row "one TCP search holding a single
// 60 KB name": a name longer than MaxNameBytes (pvAccessCPP refuses channel
// names over 500 bytes) is neither answered, waited for nor searched
// through; it is counted.
func TestNameLengthBound(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{MaxNameBytes: 500})
	s := &countingSearcher{}
	f.res.SetSearcher(s)
	long := strings.Repeat("x", 60000)
	ok := strings.Repeat("y", 500)
	q := []pva.SearchName{{CID: 1, Name: []byte(long)}, {CID: 2, Name: []byte(ok)}}
	var b Batch
	f.res.Lookup(q, &b)
	if len(b.Missing) != 1 || b.Missing[0] != 1 {
		t.Fatalf("missing %v; want only the 500-byte name", b.Missing)
	}
	cl := f.res.NewClientFrom(netip.MustParseAddr("10.0.0.1"), func(Group) {})
	cl.Wait(q, []int{0, 1}, OfferTCP)
	if st := f.res.Stats(); f.res.st.tooLong.Load() != 2 || st.Waiting != 1 || s.want != 1 {
		t.Fatalf("stats %+v, searched %d; want the long name refused twice and only the short one waited for", st, s.want)
	}
}
