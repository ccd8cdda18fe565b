// Package ratelimit bounds what one source address can make pvans do: a
// token bucket per source (Limiter) for searches handled, and a reflection
// account per destination (Reflection) so pvans never sends an address more
// reply bytes than a fixed multiple of what it received from it. Both keep
// a fixed-size table of sources that evicts the least recently seen, so a
// flood of spoofed sources costs bounded memory.
//
// It owns no sockets and decides nothing about access lists (the daemon's
// config does); time comes from internal/clock so schedules are tested
// exactly with clock.Fake.
//
// A nil *Limiter or *Reflection allows everything: that is how a zero rate
// or ratio ("unlimited") costs one nil check on the hot path.
package ratelimit

import (
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
)

// Options configure a Limiter.
type Options struct {
	// Rate is the sustained events per second allowed per source; <= 0
	// makes New return nil (unlimited).
	Rate float64
	// Burst is how many events a source may spend at once; < 1 means 1.
	Burst int
	// Sources bounds the sources remembered (least recently seen evicted;
	// an evicted source starts again with a full bucket); 0 = 65536.
	Sources int
	// Exempt sources are never limited nor remembered.
	Exempt []netip.Prefix
	Clock  clock.Clock // nil = the wall clock
}

// Limiter is a token bucket per source address, kept as a theoretical
// arrival time (GCRA) in integer nanoseconds so a fake clock gives exact
// results. Safe for concurrent use.
type Limiter struct {
	interval  time.Duration // time that earns one token
	tolerance time.Duration // interval × burst: how far tat may run ahead
	exempt    []netip.Prefix
	clk       clock.Clock
	epoch     time.Time

	mu sync.Mutex
	t  table[netip.Addr, time.Duration] // theoretical arrival time, since epoch

	allowed, limited atomic.Uint64
}

// LimiterStats are counters for metrics.
type LimiterStats struct {
	Allowed   uint64
	Limited   uint64 // events refused
	Sources   int    // sources remembered now
	Evictions uint64 // sources forgotten to make room
}

// maxSpan keeps interval × burst far from overflowing time.Duration.
const maxSpan = time.Duration(math.MaxInt64 / 4)

// New returns a limiter, or nil (unlimited) when o.Rate <= 0.
func New(o Options) *Limiter {
	if !(o.Rate > 0) {
		return nil
	}
	if o.Burst < 1 {
		o.Burst = 1
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	iv := float64(time.Second) / o.Rate
	iv = max(min(iv, float64(maxSpan)), 1)
	tol := min(iv*float64(o.Burst), float64(maxSpan))
	return &Limiter{interval: time.Duration(iv), tolerance: time.Duration(tol), exempt: o.Exempt,
		clk: o.Clock, epoch: o.Clock.Now(), t: newTable[netip.Addr, time.Duration](o.Sources)}
}

// Allow takes one token from a's bucket and reports whether there was one.
func (l *Limiter) Allow(a netip.Addr) bool { return l.AllowN(a, 1) }

// AllowN takes n tokens from a's bucket at once, or none: it reports
// whether the bucket held n. A cost above the burst is never allowed.
// n < 1 counts as 1.
func (l *Limiter) AllowN(a netip.Addr, n int) bool {
	if l == nil {
		return true
	}
	return l.count(l.exempted(a) || l.take(a, l.cost(max(n, 1)), l.tolerance))
}

// idleShare: a source is idle while, its search paid, it has spent at
// most this share of its burst. Only a busy source's searches are priced
// by their repeats (PayIfIdle, Recent): an ordinary client never touches
// the repeat memory, and a start-up burst is recognised long before its
// budget is gone.
const idleShare = 16

// PayIfIdle takes n tokens (n < 1 counts as 1) from a's bucket when a
// has, after paying, spent at most 1/16 of its burst, and reports
// whether it did; a busy source pays nothing here and its caller prices
// the search with AllowFrac. A nil Limiter and an exempt source are
// always idle.
func (l *Limiter) PayIfIdle(a netip.Addr, n int) bool {
	if l == nil {
		return true
	}
	if l.exempted(a) || l.take(a, l.cost(max(n, 1)), l.tolerance/idleShare) {
		l.allowed.Add(1)
		return true
	}
	return false
}

// AllowFrac is AllowN for a cost of num/den tokens (den > 0): a search
// priced by its share of new names.
func (l *Limiter) AllowFrac(a netip.Addr, num, den int) bool {
	if l == nil {
		return true
	}
	c := min(float64(l.interval)*float64(max(num, 0))/float64(max(den, 1)), float64(maxSpan))
	return l.count(l.exempted(a) || l.take(a, time.Duration(c), l.tolerance))
}

func (l *Limiter) exempted(a netip.Addr) bool {
	return len(l.exempt) > 0 && exempt(l.exempt, key(a))
}

// take moves a's theoretical arrival time c ahead if it then runs at most
// within ahead of now, and reports whether it did.
func (l *Limiter) take(a netip.Addr, c, within time.Duration) bool {
	a = key(a)
	now := l.clk.Now().Sub(l.epoch)
	l.mu.Lock()
	tat, fresh := l.t.get(a)
	if fresh || *tat < now {
		*tat = now
	}
	next := *tat + c
	ok := next-now <= within
	if ok {
		*tat = next
	}
	l.mu.Unlock()
	return ok
}

func (l *Limiter) count(ok bool) bool {
	if ok {
		l.allowed.Add(1)
	} else {
		l.limited.Add(1)
	}
	return ok
}

// cost is the time n tokens take to earn, saturating far from overflow
// (such a cost is beyond any tolerance, so it is refused).
func (l *Limiter) cost(n int) time.Duration {
	if n == 1 {
		return l.interval
	}
	if time.Duration(n) > maxSpan/l.interval {
		return maxSpan
	}
	return l.interval * time.Duration(n)
}

// Stats returns the counters (zero for a nil Limiter).
func (l *Limiter) Stats() LimiterStats {
	if l == nil {
		return LimiterStats{}
	}
	l.mu.Lock()
	n, ev := l.t.len(), l.t.evictions
	l.mu.Unlock()
	return LimiterStats{Allowed: l.allowed.Load(), Limited: l.limited.Load(), Sources: n, Evictions: ev}
}
