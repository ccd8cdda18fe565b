package ratelimit

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
)

// PacerOptions configure a Pacer.
type PacerOptions struct {
	// Rate is the sustained tokens per second per destination (an event
	// costs the tokens given to Delay); <= 0 makes
	// NewPacer return nil (no pacing).
	Rate float64
	// Burst is how many tokens go to a destination at once before events
	// are spaced; < 1 means 1.
	Burst int
	// MaxDelay is the longest an event may be held; one that would wait
	// longer is refused. 0 = 1 s.
	MaxDelay time.Duration
	// Destinations bounds the destinations remembered (least recently
	// used forgotten, and a forgotten one starts with its full burst);
	// 0 = 65536.
	Destinations int
	Clock        clock.Clock // nil = the wall clock
}

// Pacer spaces the events sent to one destination (address and port):
// unlike a Limiter it does not refuse an event over the rate, it says how
// long to hold it, so a receiver that drains at the rate sees every event
// and never more than Burst at once. The same GCRA as Limiter, keyed by
// destination. Safe for concurrent use. A nil *Pacer holds nothing.
type Pacer struct {
	interval, tolerance, maxDelay time.Duration
	clk                           clock.Clock
	epoch                         time.Time

	mu sync.Mutex
	t  table[netip.AddrPort, time.Duration]

	held, refused atomic.Uint64
}

// PacerStats are counters for metrics.
type PacerStats struct {
	Held         uint64 // events given a delay
	Refused      uint64 // events that would have waited beyond MaxDelay
	Destinations int
}

// NewPacer returns a pacer, or nil (no pacing) when o.Rate <= 0.
func NewPacer(o PacerOptions) *Pacer {
	if !(o.Rate > 0) {
		return nil
	}
	if o.Burst < 1 {
		o.Burst = 1
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	iv := max(min(float64(time.Second)/o.Rate, float64(maxSpan)), 1)
	// The first Burst events go at once: the next one is due when its
	// theoretical time is within Burst-1 intervals of now.
	tol := min(iv*float64(o.Burst-1), float64(maxSpan))
	return &Pacer{interval: time.Duration(iv), tolerance: time.Duration(tol), maxDelay: o.MaxDelay,
		clk: o.Clock, epoch: o.Clock.Now(), t: newTable[netip.AddrPort, time.Duration](o.Destinations)}
}

// Delay books the next event to d, worth n tokens (n < 1 counts as 1),
// and returns how long to hold it (0: send now): it is due when the
// tokens of every event booked before it and its own fit in the burst.
// ok is false, and nothing is booked, when it would have to wait longer
// than MaxDelay.
func (p *Pacer) Delay(d netip.AddrPort, n int) (wait time.Duration, ok bool) {
	if p == nil {
		return 0, true
	}
	cost := p.interval
	switch {
	case n > 1 && time.Duration(n) > maxSpan/p.interval:
		cost = maxSpan
	case n > 1:
		cost *= time.Duration(n)
	}
	d = netip.AddrPortFrom(key(d.Addr()), d.Port())
	now := p.clk.Now().Sub(p.epoch)
	p.mu.Lock()
	tat, fresh := p.t.get(d)
	if fresh || *tat < now {
		*tat = now
	}
	wait = max(*tat+cost-p.interval-p.tolerance-now, 0)
	ok = wait <= p.maxDelay
	if ok {
		*tat += cost
	}
	p.mu.Unlock()
	switch {
	case !ok:
		p.refused.Add(1)
	case wait > 0:
		p.held.Add(1)
	}
	return wait, ok
}

// Stats returns the counters (zero for a nil Pacer).
func (p *Pacer) Stats() PacerStats {
	if p == nil {
		return PacerStats{}
	}
	p.mu.Lock()
	n := p.t.len()
	p.mu.Unlock()
	return PacerStats{Held: p.held.Load(), Refused: p.refused.Load(), Destinations: n}
}
