package searchring

import (
	"net/netip"
	"testing"
	"time"
)

type discard struct{}

func (discard) SendUDP([]byte, func(netip.AddrPort, error)) {}
func (discard) Upstreams() []Upstream                       { return nil }

// One 1 s tick of a saturated ring of 100,000 unresolved names (L=30):
// drain ~3,333 Channels, reinsert them, pack ~88 datagrams.
func BenchmarkTick100k(b *testing.B) {
	r, clk, rc := newTestRing(b, Options{})
	rc.countOnly = true
	for i := range 100_000 {
		r.Want(pvName(i, 30))
	}
	clk.Advance(10 * time.Minute)
	r.tr = discard{}
	names, datagrams := r.ctr.namesSearched.Load(), r.ctr.datagrams.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clk.Advance(Tick)
	}
	b.StopTimer()
	ticks := float64(b.N)
	b.ReportMetric(float64(r.ctr.namesSearched.Load()-names)/ticks, "names/tick")
	b.ReportMetric(float64(r.ctr.datagrams.Load()-datagrams)/ticks, "datagrams/tick")
}

// Want and Drop of a distinct name (the resolver's first/last waiter).
func BenchmarkWantDrop(b *testing.B) {
	r, _, _ := newTestRing(b, Options{SweepDelay: -1})
	names := make([]string, 1024)
	for i := range names {
		names[i] = pvName(i, 30)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		n := names[i%len(names)]
		r.Want(n)
		r.Drop(n)
		i++
	}
}
