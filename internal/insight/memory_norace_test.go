//go:build !race

package insight

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
)

// Memory stays fixed while 1,000,000 distinct missing names are searched:
// the summaries evict, the heap does not grow, and the answer path does
// not depend on them. (Not under -race: the race detector's shadow memory
// makes heap figures meaningless, and 1M names take minutes under it.)
func TestMemoryFixedUnderMillionDistinctNames(t *testing.T) {
	if testing.Short() {
		t.Skip("1M names")
	}
	// Production sizes (10,000 names and clients), every name digested:
	// the summaries, not the sampler, must keep memory fixed.
	in := New(withProduction(Options{DigestNamesPerSecond: -1}))
	batch := make([]pva.SearchName, 38)
	bufs := make([][]byte, 38)
	for i := range bufs {
		bufs[i] = make([]byte, 0, 40)
	}
	miss := all(38)
	feed := func(from, to int) {
		for i := from; i < to; i += 38 {
			for j := range batch {
				bufs[j] = fmt.Appendf(bufs[j][:0], "SR:MISSING:%07d:Val-I", i+j)
				batch[j] = pva.SearchName{CID: uint32(j), Name: bufs[j]}
			}
			in.Searched(netip.AddrFrom4([4]byte{10, 2, byte(i >> 16), byte(i >> 8)}), false, nil, batch, miss, 0)
			if (i/38)%50 == 0 {
				in.Flush()
			}
		}
		in.Flush()
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	feed(0, 100_000) // fills every slot
	before := heap()
	feed(100_000, 1_000_000)
	after := heap()
	t.Logf("heap after 100k names %.1f MiB, after 1M %.1f MiB", float64(before)/(1<<20), float64(after)/(1<<20))
	if after > before+1<<20 {
		t.Errorf("heap grew by %d bytes from 100k to 1M distinct names", after-before)
	}
	r, _ := in.Unresolved("1h", 0)
	if len(r.Names) > 2*10000 {
		t.Errorf("%d names kept, more than the slots", len(r.Names))
	}
	if n, _ := in.Evictions(); n < 900_000 {
		t.Errorf("only %d evictions", n)
	}
	if tot := in.Totals(); tot.NotFound < 999_000 || tot.Dropped != 0 {
		t.Errorf("totals %+v", tot)
	}
	// The answer path is not slowed by what the summaries hold: it never
	// touches them. With a million names behind them a search still
	// allocates nothing, and it completes while the summaries' lock is
	// held, as during a digest.
	client := netip.AddrFrom4([4]byte{10, 3, 0, 1})
	if a := testing.AllocsPerRun(100, func() { in.Searched(client, false, nil, batch, miss, 0) }); a != 0 {
		t.Errorf("a search allocates %.1f times after 1M distinct names", a)
	}
	in.mu.Lock()
	done := make(chan struct{})
	go func() { in.Searched(client, true, nil, batch, miss, 0); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("a search waited for the summaries' lock")
	}
	in.mu.Unlock()
	<-done
}
