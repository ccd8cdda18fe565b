package probe

import (
	"math"
	"time"
)

// Backoff is the retry schedule after failed probes: Min, then Min×Factor,
// Min×Factor², … capped at Max, each multiplied by a random factor in
// [1−Jitter, 1+Jitter) so that servers that failed together (a network
// outage, a gateway restart) are not all retried in the same instant.
//
// Min and Max are the daemon's bounds (DefaultBackoffMin,
// DefaultBackoffMax). A zero Min is no backoff: nothing is retried on a
// timer (a failed or lost server waits to be asked for again) and hints
// are not spaced out. A zero Max is no cap; a Max below Min is Min.
type Backoff struct {
	Min    time.Duration
	Max    time.Duration
	Factor float64 // < 1: BackoffShape's
	Jitter float64 // 0 ≤ Jitter < 1; outside: BackoffShape's
}

// BackoffShape is the shape of the schedule pvans runs, its bounds aside:
// doubling, ±20 %.
var BackoffShape = Backoff{Factor: 2, Jitter: 0.2}

func (b Backoff) withDefaults() Backoff {
	if b.Min < 0 {
		b.Min = 0
	}
	if b.Max > 0 && b.Max < b.Min {
		b.Max = b.Min
	}
	if b.Factor < 1 {
		b.Factor = BackoffShape.Factor
	}
	if b.Jitter < 0 || b.Jitter >= 1 {
		b.Jitter = BackoffShape.Jitter
	}
	return b
}

// Delay is the wait before retry number failures (1 for the first retry
// after one failure); 0 without a backoff (a zero Min). u is a uniform
// random number in [0, 1); the caller owns the random source, so the
// schedule is a pure function of its inputs.
func (b Backoff) Delay(failures int, u float64) time.Duration {
	b = b.withDefaults()
	// Without a cap, the delay still stops short of time.Duration's range,
	// jitter included.
	ceiling := float64(math.MaxInt64) / 2
	if b.Max > 0 {
		ceiling = float64(b.Max)
	}
	d := float64(b.Min)
	for i := 1; i < failures && d < ceiling; i++ {
		d *= b.Factor
	}
	d = min(d, ceiling)
	return jitter(time.Duration(d), b.Jitter, u)
}

// jitter scales d by a factor in [1−j, 1+j) chosen by u ∈ [0, 1).
func jitter(d time.Duration, j, u float64) time.Duration {
	return time.Duration(float64(d) * (1 + j*(2*u-1)))
}

// The retry schedule of a server that answered over TCP and would not
// list: it doubles from UnlistableRetryMin (or DefaultBackoffMin, if
// longer) up to UnlistableRetryMax (or probe.DefaultBackoffMax). Such a server
// is alive (its watch connection stays up and tells its loss) and its
// names come from search-through, so a listing gains little; and each
// attempt may be a warning in its log (Phoebus core-pva logs every
// CREATE_CHANNEL for its missing `server` PV): about 4 a day at the cap,
// where probe.DefaultBackoffMax would make it 288.
const (
	UnlistableRetryMin = time.Minute
	UnlistableRetryMax = 6 * time.Hour
)

func unlistableBackoff(b Backoff) Backoff {
	b.Min = max(b.Min, UnlistableRetryMin)
	if b.Max > 0 {
		b.Max = max(b.Max, UnlistableRetryMax)
	}
	return b
}
