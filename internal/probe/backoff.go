package probe

import "time"

// Backoff is the retry schedule after failed probes: Min, then Min×Factor,
// Min×Factor², … capped at Max, each multiplied by a random factor in
// [1−Jitter, 1+Jitter) so that servers that failed together (a network
// outage, a gateway restart) are not all retried in the same instant.
type Backoff struct {
	Min    time.Duration
	Max    time.Duration
	Factor float64
	Jitter float64 // 0 ≤ Jitter < 1
}

// DefaultBackoff: 1 s, 2 s, 4 s … 5 min, ±20 %.
var DefaultBackoff = Backoff{Min: time.Second, Max: 5 * time.Minute, Factor: 2, Jitter: 0.2}

func (b Backoff) withDefaults() Backoff {
	if b.Min <= 0 {
		b.Min = DefaultBackoff.Min
	}
	if b.Max < b.Min {
		b.Max = max(DefaultBackoff.Max, b.Min)
	}
	if b.Factor < 1 {
		b.Factor = DefaultBackoff.Factor
	}
	if b.Jitter < 0 || b.Jitter >= 1 {
		b.Jitter = DefaultBackoff.Jitter
	}
	return b
}

// Delay is the wait before retry number failures (1 for the first retry
// after one failure). u is a uniform random number in [0, 1); the caller
// owns the random source, so the schedule is a pure function of its inputs.
func (b Backoff) Delay(failures int, u float64) time.Duration {
	b = b.withDefaults()
	d := float64(b.Min)
	for i := 1; i < failures && d < float64(b.Max); i++ {
		d *= b.Factor
	}
	d = min(d, float64(b.Max))
	return jitter(time.Duration(d), b.Jitter, u)
}

// jitter scales d by a factor in [1−j, 1+j) chosen by u ∈ [0, 1).
func jitter(d time.Duration, j, u float64) time.Duration {
	return time.Duration(float64(d) * (1 + j*(2*u-1)))
}
