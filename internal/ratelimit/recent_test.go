package ratelimit

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
)

func names(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "%s:%06d", prefix, i)
	}
	return out
}

// price is Price then Remember, as a search that was paid for.
func price(r *Recent, src string, ns [][]byte) int {
	a := mustAddr(src)
	rep, fresh := r.Price(a, len(ns), func(i int) []byte { return ns[i] }, nil)
	r.Remember(a, fresh)
	return rep
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// A name a source paid for is a repeat for that source only, for
// RepeatWindow; a name priced but never remembered (its search was
// refused) stays new.
func TestRecentRepeatsPerSourceWithinWindow(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	r := NewRecent(clk, nil)
	// A handful of names searched again and again are never repeats.
	few := names("few", RepeatMinNames-1)
	price(r, "192.0.2.1", few)
	if rep := price(r, "192.0.2.1", few); rep != 0 {
		t.Fatalf("%d names: %d repeats, want 0 below RepeatMinNames", len(few), rep)
	}
	ns := names("pv", 10)
	if rep := price(r, "192.0.2.1", ns); rep != 0 {
		t.Fatalf("first search: %d repeats", rep)
	}
	if rep := price(r, "192.0.2.1", ns[:5]); rep != 5 {
		t.Fatalf("repeat: %d repeats, want 5", rep)
	}
	price(r, "192.0.2.2", few)
	if rep := price(r, "192.0.2.2", ns); rep != 0 {
		t.Fatalf("another source: %d repeats, want 0", rep)
	}
	// Priced, not paid: still new next time.
	other := names("other", 3)
	if rep, fresh := r.Price(srcA, 3, func(i int) []byte { return other[i] }, nil); rep != 0 || len(fresh) != 3 {
		t.Fatalf("%d repeats, %d fresh", rep, len(fresh))
	}
	if rep := price(r, "192.0.2.1", other); rep != 0 {
		t.Fatalf("a name never paid for counted as a repeat (%d)", rep)
	}
	clk.Advance(RepeatWindow - time.Nanosecond)
	if rep := price(r, "192.0.2.1", ns); rep != 10 {
		t.Fatalf("inside the window: %d repeats, want 10", rep)
	}
	clk.Advance(time.Nanosecond)
	if rep := price(r, "192.0.2.1", ns); rep != 0 {
		t.Fatalf("after the window: %d repeats, want 0", rep)
	}
	// The IPv4-mapped form is the same source.
	price(r, "192.0.2.1", few)
	if rep := price(r, "::ffff:192.0.2.1", ns); rep != 10 {
		t.Fatalf("mapped source: %d repeats, want 10", rep)
	}
}

// The memory is bounded per source and in all, however many sources and
// names a flood spoofs; a source over its share only loses discounts.
func TestRecentBounded(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	const per, total = 100, 250
	r := newRecent(clk, nil, 1, per, total)
	ns := names("flood", 1000)
	price(r, "192.0.2.1", ns)
	if n := r.Len(); n != per {
		t.Fatalf("one source keeps %d names, want %d", n, per)
	}
	if rep := price(r, "192.0.2.1", ns[:per+10]); rep != per {
		t.Fatalf("%d repeats, want the %d remembered", rep, per)
	}
	for i := range 100 {
		price(r, fmt.Sprintf("10.0.%d.%d", i/256, i%256), ns)
		if n := r.Len(); n > total {
			t.Fatalf("%d names remembered, bound %d", n, total)
		}
	}
	if n := r.Len(); n != total {
		t.Fatalf("%d names remembered after the flood, want %d", n, total)
	}
	if len(r.count) > total/per+1 {
		t.Fatalf("%d sources counted", len(r.count))
	}
	// The oldest went first: the last source's names are there, the
	// first source's are not.
	if rep := price(r, "10.0.0.99", ns[:per]); rep != per {
		t.Fatalf("newest source: %d repeats, want %d", rep, per)
	}
	// Everything expires, and the memory is empty again.
	clk.Advance(RepeatWindow)
	price(r, "192.0.2.9", ns[:1])
	if n := r.Len(); n != 1 || len(r.idx) != 1 || len(r.count) != 1 {
		t.Fatalf("after the window: %d names, %d keys, %d sources", n, len(r.idx), len(r.count))
	}
}

// A name forgotten early, to make room within the bound, is counted;
// one that outlived RepeatWindow is not.
func TestRecentCountsEvictions(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	const per, total = 100, 250
	var evicted metrics.Counter
	r := newRecent(clk, &evicted, 1, per, total)
	for i := range 3 {
		price(r, fmt.Sprintf("10.1.0.%d", i), names("a", per)) // 300 names: 50 past the bound
	}
	if n, e := r.Len(), evicted.Load(); n != total || e != 3*per-total {
		t.Fatalf("%d names remembered, %d evicted; want %d, %d", n, e, total, 3*per-total)
	}
	price(r, "10.1.0.9", names("b", 10)) // 10 more: the oldest 10 go
	if e := evicted.Load(); e != 3*per-total+10 {
		t.Fatalf("%d evicted, want %d", e, 3*per-total+10)
	}
	// Expired names make room without an eviction.
	clk.Advance(RepeatWindow)
	price(r, "10.1.0.9", names("c", per))
	if n, e := r.Len(), evicted.Load(); n != per || e != 3*per-total+10 {
		t.Fatalf("after the window: %d names, %d evicted; want %d, %d", n, e, per, 3*per-total+10)
	}
}

func TestRecentNil(t *testing.T) {
	var r *Recent
	rep, fresh := r.Price(srcA, 3, func(int) []byte { return nil }, nil)
	r.Remember(srcA, fresh)
	if rep != 0 || r.Len() != 0 {
		t.Fatal("a nil memory remembered")
	}
}

// PayIfIdle pays only while the source stays within 1/16 of its burst;
// AllowFrac charges a share of a token.
func TestLimiterIdleAndFractions(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	l := New(Options{Rate: 10, Burst: 160, Clock: clk})
	for i := range 10 {
		if !l.PayIfIdle(srcA, 1) {
			t.Fatalf("busy after %d of a burst of 160", i)
		}
	}
	if l.PayIfIdle(srcA, 1) {
		t.Fatal("idle after a sixteenth of the burst")
	}
	if !l.PayIfIdle(srcB, 10) || l.PayIfIdle(srcB, 1) {
		t.Fatal("another source's idle share")
	}
	// 150 tokens are left to A: 150×64 sixty-fourths, not one more.
	for i := range 150 * 64 {
		if !l.AllowFrac(srcA, 1, 64) {
			t.Fatalf("refused after %d sixty-fourths", i)
		}
	}
	if l.AllowFrac(srcA, 1, 64) {
		t.Fatal("a sixty-fourth beyond the burst")
	}
	clk.Advance(100 * time.Millisecond / 64)
	if !l.AllowFrac(srcA, 1, 64) || l.AllowFrac(srcA, 1, 64) {
		t.Fatal("want one sixty-fourth back after 1/64 of 1/rate")
	}
	var nl *Limiter
	if !nl.PayIfIdle(srcA, 1) || !nl.AllowFrac(srcA, 1, 1) {
		t.Fatal("a nil limiter limits")
	}
}

// At the production bounds, a flood from spoofed sources fills the
// memory to RepeatNamesTotal and no further, each source to at most
// RepeatNamesPerSource, the names it forgets early to stay there are
// counted, and the heap it takes stays within ~100 bytes a name
// (docs/SECURITY.md's bounds table says ~80).
func TestRecentProductionBounds(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	ns := names("spoofed", RepeatNamesPerSource+1000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var evicted metrics.Counter
	r := NewRecent(clk, &evicted)
	for i := range 6 {
		a := netip.AddrFrom4([4]byte{10, 9, 0, byte(i)})
		_, fresh := r.Price(a, len(ns), func(j int) []byte { return ns[j] }, nil)
		r.Remember(a, fresh)
		if n := r.count[a]; n > RepeatNamesPerSource {
			t.Fatalf("source %d: %d names remembered, bound %d", i, n, RepeatNamesPerSource)
		}
		if n := r.Len(); n > RepeatNamesTotal {
			t.Fatalf("%d names remembered, bound %d", n, RepeatNamesTotal)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := r.Len(); n != RepeatNamesTotal || len(r.idx) != RepeatNamesTotal {
		t.Fatalf("%d names (%d keys) remembered, want %d", n, len(r.idx), RepeatNamesTotal)
	}
	// Each source kept its share; all but the last RepeatNamesTotal went
	// early, and each is counted.
	if e, want := evicted.Load(), uint64(6*RepeatNamesPerSource-RepeatNamesTotal); e != want {
		t.Fatalf("%d names evicted, want %d", e, want)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 100*RepeatNamesTotal {
		t.Fatalf("the memory takes %d bytes for %d names", grew, RepeatNamesTotal)
	} else {
		t.Logf("%d names remembered in %d bytes (%d a name)", RepeatNamesTotal, grew, grew/RepeatNamesTotal)
	}
	runtime.KeepAlive(ns)
	runtime.KeepAlive(r)
}

// RepeatMinNames counts distinct names: one name listed RepeatMinNames
// times in a search is one name remembered, so a flood of that search
// (a flood of one name) pays full price, as docs/SECURITY.md says,
// rather than a 64th once its copies filled the count.
func TestRecentCountsDistinctNames(t *testing.T) {
	r := NewRecent(clock.NewFake(time.Unix(1e9, 0)), nil)
	one := make([][]byte, RepeatMinNames)
	for i := range one {
		one[i] = []byte("flood:one")
	}
	price(r, "192.0.2.7", one)
	if rep := price(r, "192.0.2.7", one); rep != 0 {
		t.Fatalf("%d of a one-name search's copies priced as repeats; a source with one name remembered has none", rep)
	}
	if n := r.Len(); n != 1 {
		t.Fatalf("%d names remembered for one distinct name", n)
	}
}
