package searchring

import (
	"math"
	"testing"
	"time"
)

// The PVXS rate (docs/protocol.md, "Search traffic at scale"): at N
// unresolved names of length L the steady state is N / (30 × C) datagrams
// per second per destination, C = floor(1359/(5+L)): about 88 packets/s at
// N = 100,000, L = 30 (TestSteadyStateTrafficMatchesSpecAtScale).
func TestSteadyStateTrafficMatchesSpec(t *testing.T) { steadyState(t, 10_000) }

func steadyState(t *testing.T, n int) {
	const l = 30
	r, clk, rc := newTestRing(t, Options{})
	rc.countOnly = true
	for i := range n {
		r.Want(pvName(i, l))
	}
	// Saturation: attempt 32 comes ~466 s in; cohort deferrals add a few
	// ticks. Ten minutes is past all of it.
	clk.Advance(10 * time.Minute)
	r.mu.Lock()
	for _, ch := range r.byName {
		if ch.attempts != Buckets {
			r.mu.Unlock()
			t.Fatalf("channel %s has %d attempts after 10 min: ring not saturated", ch.name, ch.attempts)
		}
	}
	r.mu.Unlock()

	const window = 2 * time.Minute
	before := rc.sent()
	perTick := make([]int, 0, int(window/Tick))
	for range int(window / Tick) {
		c := rc.sent()
		clk.Advance(Tick)
		perTick = append(perTick, rc.sent()-c)
	}
	got := float64(rc.sent()-before) / window.Seconds()
	c := capacity(l)
	want := float64(n) / (Buckets * float64(c))
	t.Logf("N=%d L=%d C=%d: %.1f datagrams/s measured, PVXS %.1f; per-tick burst min %d max %d",
		n, l, c, got, want, minOf(perTick), maxOf(perTick))
	if math.Abs(got-want)/want > 0.10 {
		t.Fatalf("%.1f datagrams/s, the PVXS rate is %.1f (±10%%)", got, want)
	}
	if s := r.Stats(); s.Searching != n {
		t.Fatalf("%d searching, want %d", s.Searching, n)
	}
}

func minOf(v []int) int {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []int) int {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
