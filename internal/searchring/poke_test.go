package searchring

import (
	"slices"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/metrics"
)

// tickTimes is the distinct times at which datagrams went out.
func tickTimes(dgs []sent) []time.Duration {
	var out []time.Duration
	for _, d := range dgs {
		if len(out) == 0 || out[len(out)-1] != d.at {
			out = append(out, d.at)
		}
	}
	return out
}

func attemptsOf(r *Ring, name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byName[chanKey{name, false}].attempts
}

// fillEveryBucket wants 10 names per second for 30 s and lets them
// saturate, so every tick has something to send.
func fillEveryBucket(r *Ring, clk interface{ Advance(time.Duration) }) {
	for s := range Buckets {
		for i := range 10 {
			r.Want(pvName(s*10+i, 20))
		}
		clk.Advance(time.Second)
	}
	clk.Advance(10 * time.Minute)
}

func TestPokeRunsOneFastRevolutionWithoutCounting(t *testing.T) {
	r, clk, rc := newTestRing(t, Options{})
	fillEveryBucket(r, clk)
	clk.Advance(ms(400)) // between ticks
	// A young Channel: attempt count still small.
	const young = "YOUNG:PV"
	r.Want(young)
	clk.Advance(3 * time.Second)
	before := attemptsOf(r, young)
	if before < 2 || before >= Buckets {
		t.Fatalf("young channel has %d attempts", before)
	}
	all := r.Occupancy()
	total := 0
	for _, v := range all {
		total += v
	}

	rc.reset()
	pokedAt := clk.Now().Sub(rc.start)
	if !r.Poke(PokeOperator) {
		t.Fatal("first poke refused")
	}
	clk.Advance(0) // the tick fires at once
	if got := rc.datagrams(); len(got) == 0 || got[0].at != pokedAt {
		t.Fatalf("no immediate tick on poke")
	}
	clk.Advance(FastTick*Buckets - time.Millisecond) // just before the revolution ends
	fast := rc.datagrams()
	if a := attemptsOf(r, young); a != before {
		t.Fatalf("attempt count moved %d -> %d during the fast revolution", before, a)
	}
	ticks := tickTimes(fast)
	if len(ticks) != Buckets {
		t.Fatalf("%d ticks in the fast revolution, want %d: %v", len(ticks), Buckets, ticks)
	}
	for i, at := range ticks {
		if want := pokedAt + time.Duration(i)*FastTick; at != want {
			t.Fatalf("fast tick %d at %v, want %v", i, at, want)
		}
	}
	// Every unresolved name searched exactly once in the revolution.
	seen := map[string]int{}
	for _, d := range fast {
		for _, n := range d.names {
			seen[n]++
		}
	}
	if len(seen) != total {
		t.Fatalf("%d names searched in the fast revolution, %d in the ring", len(seen), total)
	}
	for n, c := range seen {
		if c != 1 {
			t.Fatalf("%s searched %d times in one fast revolution", n, c)
		}
	}

	// Then back to 1 s ticks, counting again.
	rc.reset()
	clk.Advance(10*time.Second + time.Millisecond)
	ticks = tickTimes(rc.datagrams())
	want := []time.Duration{}
	for i := range 11 {
		want = append(want, pokedAt+Buckets*FastTick+time.Duration(i)*Tick)
	}
	if !slices.Equal(ticks, want) {
		t.Fatalf("ticks after the fast revolution %v, want %v", ticks, want)
	}
	if a := attemptsOf(r, young); a <= before {
		t.Fatalf("attempt count %d did not advance after the fast revolution (was %d)", a, before)
	}
	if r.ctr.pokes.Load() != 1 || r.ctr.pokesIgnored.Load() != 0 {
		t.Fatalf("stats %+v", metrics.Sprint(&r.ctr))
	}
}

// The 30 s hold-off applies whatever the cause, and a poke during a fast
// revolution is ignored.
func TestPokeHoldoffForEveryCause(t *testing.T) {
	causes := []string{PokeBeacon, PokeDiscovery, PokeNameServer, PokeOperator}
	for _, first := range causes {
		t.Run(first, func(t *testing.T) {
			r, clk, rc := newTestRing(t, Options{})
			r.Want("X")
			clk.Advance(5 * time.Second)
			if !r.Poke(first) {
				t.Fatal("first poke refused")
			}
			clk.Advance(time.Second) // inside the fast revolution
			for _, c := range causes {
				if r.Poke(c) {
					t.Fatalf("%s poke accepted during a fast revolution", c)
				}
			}
			clk.Advance(10 * time.Second) // revolution over, hold-off running
			for _, c := range causes {
				if r.Poke(c) {
					t.Fatalf("%s poke accepted 11 s after the last", c)
				}
			}
			clk.Advance(PokeHoldoff - 11*time.Second - time.Millisecond)
			for _, c := range causes {
				if r.Poke(c) {
					t.Fatalf("%s poke accepted 1 ms before the hold-off ends", c)
				}
			}
			// No ignored poke restarted the hold-off or the fast ticks.
			rc.reset()
			clk.Advance(time.Millisecond)
			if !r.Poke(causes[(slices.Index(causes, first)+1)%len(causes)]) {
				t.Fatal("poke refused after the hold-off")
			}
			if r.ctr.pokes.Load() != 2 || r.ctr.pokesIgnored.Load() != 3*uint64(len(causes)) {
				t.Fatalf("stats %+v", metrics.Sprint(&r.ctr))
			}
		})
	}
}
