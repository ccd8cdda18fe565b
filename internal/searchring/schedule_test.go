package searchring

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
)

// The PVXS schedule (docs/protocol.md, "The client search ring"): attempt 1
// after 10 ms, attempt 2 at the next tick (0–1 s), then 1 s, 2 s, … 29 s,
// then 30 s for ever.
func TestAttemptDelaysMatchSpecTable(t *testing.T) {
	for _, phase := range []time.Duration{0, ms(300), ms(985)} {
		t.Run(fmt.Sprint("want_at_", phase), func(t *testing.T) {
			r, clk, rc := newTestRing(t, Options{})
			clk.Advance(phase)
			// Company in the ring must not change one name's schedule.
			for i := range 50 {
				r.Want(pvName(i, 30))
			}
			const target = "TARGET:PV"
			r.Want(target)
			wantAt := phase
			clk.Advance(20 * time.Minute)

			at := rc.times(target)
			if len(at) < 40 {
				t.Fatalf("only %d searches in 20 minutes", len(at))
			}
			prev := wantAt
			var delays []time.Duration
			for _, a := range at {
				delays = append(delays, a-prev)
				prev = a
			}
			// The first tick after the initial search is at the next whole second.
			second := time.Duration(math.Ceil(float64(wantAt+InitialDelay)/float64(time.Second)))*time.Second - (wantAt + InitialDelay)
			want := []time.Duration{InitialDelay, second}
			for k := 1; k <= 29; k++ {
				want = append(want, secs(k))
			}
			for len(want) < len(delays) {
				want = append(want, 30*time.Second)
			}
			for i := range delays {
				if delays[i] != want[i] {
					t.Fatalf("attempt %d: delay %v, want %v (all delays %v)", i+1, delays[i], want[i], delays)
				}
			}
			if second <= 0 || second > time.Second {
				t.Fatalf("second attempt delay %v outside (0, 1s]", second)
			}
			count := func(within time.Duration) int {
				n := 0
				for _, a := range at {
					if a-wantAt < within {
						n++
					}
				}
				return n
			}
			if n := count(time.Minute); n != 12 {
				t.Errorf("%d searches in the first minute, PVXS sends ~12", n)
			}
			if n := count(438 * time.Second); n != 31 {
				t.Errorf("%d searches in the first 7.3 minutes, spec says 31", n)
			}
			t.Logf("delays: %v", delays[:33])
		})
	}
}

// 5,000 names wanted within the 10 ms window go out together in full
// datagrams: ceil(5000/38) at L=30, not 5,000.
func TestInitialCoalescing(t *testing.T) {
	r, clk, rc := newTestRing(t, Options{})
	const n, l = 5000, 30
	for i := range n {
		if i > 0 && i%500 == 0 {
			clk.Advance(ms(1)) // spread over 0..9 ms
		}
		r.Want(pvName(i, l))
	}
	if got := rc.sent(); got != 0 {
		t.Fatalf("%d datagrams before the 10 ms coalescing timer", got)
	}
	clk.Set(rc.start.Add(InitialDelay))
	dgs := rc.datagrams()
	capacity := capacity(l)
	if capacity != 38 {
		t.Fatalf("capacity at L=30 is %d, want 38", capacity)
	}
	wantN := (n + capacity - 1) / capacity
	if len(dgs) != wantN {
		t.Fatalf("%d datagrams, want ceil(%d/%d) = %d", len(dgs), n, capacity, wantN)
	}
	seen := map[string]bool{}
	for i, d := range dgs {
		if d.at != InitialDelay {
			t.Fatalf("datagram %d at %v, want %v", i, d.at, InitialDelay)
		}
		if d.size > pva.MaxSearchDatagram {
			t.Fatalf("datagram %d is %d bytes", i, d.size)
		}
		if i < len(dgs)-1 && len(d.names) != capacity {
			t.Fatalf("datagram %d holds %d names, want %d", i, len(d.names), capacity)
		}
		for _, nm := range d.names {
			if seen[nm] {
				t.Fatalf("%s searched twice", nm)
			}
			seen[nm] = true
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct names searched, want %d", len(seen), n)
	}
	if s := r.Stats(); r.ctr.datagrams.Load() != uint64(wantN) || r.ctr.namesSearched.Load() != n || s.Searching != n || s.Initial != 0 {
		t.Fatalf("stats %+v", s)
	}

	// The next window is a new batch.
	rc.reset()
	r.Want("LATE:PV")
	clk.Advance(InitialDelay)
	if got := rc.datagrams(); len(got) != 1 || len(got[0].names) != 1 || got[0].names[0] != "LATE:PV" {
		t.Fatalf("late name: %+v", got)
	}
}

// Ten thousand names created together are bled into neighbouring buckets
// until no bucket exceeds the next one by more than the threshold (plus the
// one entry the "strictly greater" rule lets through).
func TestCohortSplitting(t *testing.T) {
	r, clk, rc := newTestRing(t, Options{})
	rc.countOnly = true
	const n = 10000
	for i := range n {
		r.Want(pvName(i, 30))
	}
	clk.Advance(InitialDelay)
	var rows []string
	maxStep := func(o [Buckets]int) (int, int) {
		worst, at := math.MinInt, 0
		for i := range Buckets {
			if d := o[i] - o[(i+1)%Buckets]; d > worst {
				worst, at = d, i
			}
		}
		return worst, at
	}
	const revolutions = 40
	settled := -1
	for rev := 1; rev <= revolutions; rev++ {
		clk.Advance(Buckets * Tick)
		o := r.Occupancy()
		sum, top := 0, 0
		for _, v := range o {
			sum += v
			top = max(top, v)
		}
		if sum != n {
			t.Fatalf("revolution %d: %d names in the ring, want %d", rev, sum, n)
		}
		step, _ := maxStep(o)
		if step <= CohortThreshold+1 && settled < 0 {
			settled = rev
		} else if step > CohortThreshold+1 {
			settled = -1
		}
		var b strings.Builder
		for _, v := range o {
			fmt.Fprintf(&b, "%5d", v)
		}
		rows = append(rows, fmt.Sprintf("rev %2d max %5d step %5d |%s", rev, top, step, b.String()))
	}
	for _, row := range rows {
		t.Log(row)
	}
	if settled < 0 {
		t.Fatalf("bucket steps still above %d after %d revolutions", CohortThreshold+1, revolutions)
	}
	t.Logf("every bucket within %d of the next from revolution %d on", CohortThreshold+1, settled)
	// The per-tick burst is the largest bucket: without splitting the whole
	// cohort would go out in one tick every 30 s.
	o := r.Occupancy()
	step, at := maxStep(o)
	if step > CohortThreshold+1 {
		t.Fatalf("bucket %d exceeds the next by %d", at, step)
	}
	if top := slices.Max(o[:]); top > n/10 {
		t.Fatalf("largest bucket holds %d of %d names", top, n)
	}
}
