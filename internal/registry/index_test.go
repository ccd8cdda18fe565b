package registry

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/pvans-project/pvans/internal/pva"
)

// checkIndex verifies the table's invariants against want: every entry is
// reachable from its home slot without crossing an empty slot, the count is
// right, and find agrees with want for every name of universe.
func checkIndex(t *testing.T, x *nameIndex, want map[string]uint32, universe []string) {
	t.Helper()
	n := 0
	for i, g := range x.tags {
		if g == 0 {
			if x.ents[i] != (entry{}) {
				t.Fatalf("empty slot %d keeps %+v", i, x.ents[i])
			}
			continue
		}
		n++
		if g != x.hashString(x.ents[i].name) {
			t.Fatalf("slot %d: tag %#x is not the tag of %q", i, g, x.ents[i].name)
		}
		for j := g >> x.shift; j != uint32(i); j = (j + 1) & x.mask {
			if x.tags[j] == 0 {
				t.Fatalf("slot %d (%q) unreachable: empty slot %d after its home", i, x.ents[i].name, j)
			}
		}
	}
	if n != x.count || n != len(want) {
		t.Fatalf("%d entries, count %d, want %d", n, x.count, len(want))
	}
	for _, name := range universe {
		got, ok := x.get(name)
		w, wok := want[name]
		if ok != wok || got != w {
			t.Fatalf("get(%q) = %d, %v; want %d, %v", name, got, ok, w, wok)
		}
		i := x.findBytes(x.hashBytes([]byte(name)), []byte(name))
		if (i >= 0) != wok {
			t.Fatalf("findBytes(%q) = %d, want present=%v", name, i, wok)
		}
	}
}

// TestNameIndexRandomOps drives the table through growth, long clusters
// that wrap around its end, backward-shift deletions and shrinking, and
// compares it with a Go map after every operation.
func TestNameIndexRandomOps(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 99))
		x := newNameIndex()
		want := map[string]uint32{}
		universe := make([]string, 300)
		for i := range universe {
			universe[i] = fmt.Sprintf("N%d:%d", seed, i)
		}
		// Phases: fill to ~250 (growth), churn, drain to a few (shrink).
		for step := range 3000 {
			name := universe[rng.IntN(len(universe))]
			del := rng.IntN(3) == 0
			switch {
			case step > 2000:
				del = rng.IntN(10) != 0
			case step > 1000:
				del = rng.IntN(2) == 0
			}
			if del {
				x.delete(name)
				delete(want, name)
			} else {
				srv := uint32(rng.IntN(5))
				x.set(name, srv)
				want[name] = srv
			}
			if x.underloaded() {
				x.tags, x.ents, x.shift, x.mask = x.rebuilt(x.count)
			}
			if step%7 == 0 || step > 2900 {
				checkIndex(t, &x, want, universe)
			}
		}
		checkIndex(t, &x, want, universe)
		for name := range want {
			x.delete(name)
			delete(want, name)
			if x.underloaded() {
				x.tags, x.ents, x.shift, x.mask = x.rebuilt(x.count)
			}
		}
		checkIndex(t, &x, want, universe)
		if len(x.tags) != 1<<minIndexBits {
			t.Fatalf("seed %d: %d slots left for %d names; want the minimum after draining", seed, len(x.tags), x.count)
		}
	}
}

// TestNameIndexFullLoad fills the smallest table to its maximum load, where
// clusters are long and wrap around, and deletes everything in random
// order.
func TestNameIndexFullLoad(t *testing.T) {
	x := newNameIndex()
	want := map[string]uint32{}
	var universe []string
	for i := 0; !x.overloaded(x.count + 1); i++ {
		n := fmt.Sprintf("F%d", i)
		universe = append(universe, n)
		x.set(n, uint32(i))
		want[n] = uint32(i)
	}
	if len(x.tags) != 1<<minIndexBits {
		t.Fatalf("grew to %d slots below the maximum load", len(x.tags))
	}
	checkIndex(t, &x, want, universe)
	for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(len(universe)) {
		x.delete(universe[i])
		delete(want, universe[i])
		checkIndex(t, &x, want, universe)
	}
}

// TestLookupTagCollision plants an entry whose tag equals another name's,
// ahead of it in its cluster: the batch path must compare strings and fall
// back to a full probe, for a hit and for a miss.
func TestLookupTagCollision(t *testing.T) {
	r, _ := newTest(t, Options{})
	mustUpsert(t, r, 1)
	mustUpsert(t, r, 2)
	const target = "TARGET:NAME"
	tag := r.idx.hashString(target)
	// Plant "decoy" (held by server 2) at target's home slot with target's
	// tag, as a hash collision would.
	i := tag >> r.idx.shift
	for r.idx.tags[i] != 0 {
		i = (i + 1) & r.idx.mask
	}
	r.idx.tags[i], r.idx.ents[i] = tag, entry{name: "decoy", srv: slotOf(t, r, guid(2))}
	r.idx.count++
	q := []pva.SearchName{{Name: []byte(target)}, {Name: []byte("other")}}
	out := make([]*Holder, len(q))
	r.LookupBatch(q, out)
	if out[0] != nil || out[1] != nil {
		t.Fatalf("before any claim: %v %v", out[0], out[1])
	}
	if err := r.ReplaceNames(guid(1), []string{target, "other"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	r.LookupBatch(q, out)
	if out[0] == nil || out[0].GUID != guid(1) || out[1] == nil || out[1].GUID != guid(1) {
		t.Fatalf("after claim: %+v %+v", out[0], out[1])
	}
	if h := r.Lookup([]byte(target)); h == nil || h.GUID != guid(1) {
		t.Fatalf("Lookup: %+v", h)
	}
}

// TestConcurrentReadersDuringGrowth has readers batch-look-up while the
// writer alternates between a small and a large name set, so the index
// grows and shrinks under them: the names in both sets must never go
// missing, and the others are all present or all absent.
func TestConcurrentReadersDuringGrowth(t *testing.T) {
	r, _ := newTest(t, Options{})
	mustUpsert(t, r, 1)
	const small, large = 20, 3000
	big := make([]string, large)
	for i := range big {
		big[i] = fmt.Sprintf("G:%d", i)
	}
	q := make([]pva.SearchName, large)
	for i := range q {
		q[i] = pva.SearchName{CID: uint32(i), Name: []byte(big[i])}
	}
	if err := r.ReplaceNames(guid(1), big[:small], SourceProbe); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan string, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]*Holder, len(q))
			for !stop.Load() {
				r.LookupBatch(q, out)
				rest := 0
				for i, h := range out {
					if i < small && h == nil {
						errs <- fmt.Sprintf("%s missing during a rebuild", big[i])
						return
					}
					if i >= small && h != nil {
						rest++
					}
				}
				if rest != 0 && rest != large-small {
					errs <- fmt.Sprintf("torn read: %d of %d", rest, large-small)
					return
				}
				reads.Add(1)
			}
		}()
	}
	grown := 0
	for i := 0; i < 40 || reads.Load() < 20; i++ {
		set := big
		if i%2 == 1 {
			set = big[:small]
		}
		if err := r.ReplaceNames(guid(1), set, SourceProbe); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 && len(r.idx.tags) >= 2*large {
			grown++
		}
		if i%2 == 1 && len(r.idx.tags) > 8*small {
			t.Errorf("index kept %d slots for %d names", len(r.idx.tags), small)
		}
	}
	stop.Store(true)
	wg.Wait()
	select {
	case e := <-errs:
		t.Fatal(e)
	default:
	}
	if grown == 0 {
		t.Fatal("the index never grew")
	}
}

// TestBatchAgreesWithSingleLookups checks the batched passes (several
// chunks, hits, misses, record.FIELD names, empty names) against one probe
// per name.
func TestBatchAgreesWithSingleLookups(t *testing.T) {
	for _, field := range []bool{false, true} {
		r, _ := newTest(t, Options{FieldNames: field})
		var q []pva.SearchName
		for s := 1; s <= 3; s++ {
			mustUpsert(t, r, s)
			var set []string
			for i := range 100 {
				set = append(set, fmt.Sprintf("S%d:R%d", s, i))
			}
			if err := r.ReplaceNames(guid(s), set, SourceProbe); err != nil {
				t.Fatal(err)
			}
			for i, n := range set {
				for _, v := range []string{n, n + ".VAL", n + ".X{\"a\":1}", "miss" + n, n + ".lower", ""} {
					if i%3 == 0 {
						q = append(q, pva.SearchName{CID: uint32(len(q)), Name: []byte(v)})
					}
				}
			}
		}
		out := make([]*Holder, len(q))
		r.LookupBatch(q, out)
		hits := 0
		for i := range q {
			want := r.Lookup(q[i].Name)
			if out[i] != want {
				t.Fatalf("field=%v %q: batch %v, single %v", field, q[i].Name, out[i], want)
			}
			if want != nil {
				hits++
			}
		}
		if wantHits := len(q) / 6 * map[bool]int{false: 1, true: 3}[field]; hits != wantHits {
			t.Fatalf("field=%v: %d hits of %d names, want %d", field, hits, len(q), wantHits)
		}
	}
}

// TestEntrySize: the claimant count lives in what was the entry's padding;
// the index's bytes per name (docs/PERFORMANCE.md) did not grow for it.
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n != 24 {
		t.Fatalf("an index entry is %d bytes, want 24", n)
	}
}
