package probe

import (
	"context"
	"math"
	"time"

	"github.com/pvans-project/pvans/internal/pvaconn"
)

// bound is a bound option's value: 0 or negative is no bound.
func bound(n int) int {
	if n <= 0 {
		return math.MaxInt
	}
	return n
}

// within is the shorter of two timeouts, 0 being none.
func within(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return max(b, 0)
	}
	return a
}

// withTimeout is context.WithTimeout, 0 or negative being none.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// timings are the options Apply replaces as one value, so an attempt
// sees the old ones or the new ones, never a mix.
type timings struct {
	probeTimeout, firstTimeout, reprobe time.Duration
	backoff                             Backoff
	conn                                pvaconn.Options // template for new connections
	throughRetries, maxThrough          int
}

// Timings are the options a running prober can change (a configuration
// reload); zero fields keep the current value. Each tag names the setting
// the field takes (config.Fill).
type Timings struct {
	Concurrency        int
	PerHostConcurrency int
	EchoInterval       time.Duration
	IdleTimeout        time.Duration // 0 with a new EchoInterval: DefaultIdleTimeout of it
	ProbeTimeout       time.Duration
	FirstTimeout       time.Duration
	ThroughRetries     int
	MaxThrough         int
	Reprobe            time.Duration
	Backoff            Backoff
}

// Apply applies new timings from the next attempt on: its timeout and
// connection (echo, idle timeout) are the new ones, and so is the schedule
// it sets (re-listing, backoff); a shortened re-listing period also pulls
// in re-listings already scheduled later than it. Watch connections
// already open keep theirs. New concurrency bounds apply to the next
// probe to start; probes running beyond them finish.
func (p *Prober) Apply(t Timings) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.tm.Load()
	next := *cur
	if t.ProbeTimeout > 0 {
		next.probeTimeout = t.ProbeTimeout
	}
	if t.FirstTimeout > 0 {
		next.firstTimeout = t.FirstTimeout
	}
	if t.ThroughRetries > 0 {
		next.throughRetries = t.ThroughRetries
	}
	if t.MaxThrough > 0 {
		next.maxThrough = t.MaxThrough // endpoints above a lowered bound go by their budget
	}
	if t.Reprobe != 0 {
		next.reprobe = t.Reprobe
	}
	if t.Backoff.Min > 0 {
		next.backoff = t.Backoff.withDefaults()
	}
	if t.EchoInterval > 0 {
		next.conn.EchoInterval = t.EchoInterval
		next.conn.IdleTimeout = DefaultIdleTimeout(t.EchoInterval)
	}
	if t.IdleTimeout > 0 {
		next.conn.IdleTimeout = t.IdleTimeout
	}
	p.sched.setLimits(t.Concurrency, t.PerHostConcurrency)
	p.tm.Store(&next)
	if next.reprobe > 0 && next.reprobe < cur.reprobe {
		// A shorter re-listing period applies to re-listings already
		// scheduled, not only to the ones after them.
		now := p.opt.Clock.Now()
		for _, s := range p.servers {
			if s.timer != nil && s.failures == 0 && s.next.Sub(now) > next.reprobe {
				p.schedule(s, jitter(next.reprobe, reprobeJitter, p.rnd.Float64()))
			}
		}
	}
}
