package insight

import (
	"math"
	"math/rand/v2"
)

// sampler keeps the name summaries' digest within a budget of names per
// second. The rate of unclaimed names arriving is the larger of the last
// whole second's count and the current second's so far; when it exceeds
// the budget, each search message's names are taken with probability
// p = budget/rate and counted with weight 1/p (rounded at random, so every
// count stays an unbiased estimate). One p for all of a second's digests
// keeps the estimates' variance as low as the budget allows; the first
// second of a storm takes at most budget·(1 + ln(digests)) names. Used
// under Insight.mu only.
type sampler struct {
	perSec    float64 // ≤ 0: no limit
	sec       int64   // the current second (unix)
	cur, prev float64 // names staged in the current and the previous second
	rng       *rand.Rand
	out       uint64 // names not digested (sampled out), since start
}

func (s *sampler) init(perSec int, now int64) {
	s.perSec = float64(perSec)
	s.sec = now / 1e9
	s.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
}

// rate counts a digest of names unclaimed names at now and returns the
// probability with which its messages are taken (1: every one).
func (s *sampler) rate(names int, now int64) float64 {
	if s.perSec <= 0 || names == 0 {
		return 1
	}
	switch sec := now / 1e9; {
	case sec == s.sec+1:
		s.prev, s.cur, s.sec = s.cur, 0, sec
	case sec > s.sec+1:
		s.prev, s.cur, s.sec = 0, 0, sec
	}
	s.cur += float64(names)
	if r := math.Max(s.cur, s.prev); r > s.perSec {
		return s.perSec / r
	}
	return 1
}

// take reports whether a message is in the sample.
func (s *sampler) take(p float64) bool { return p >= 1 || s.rng.Float64() < p }

// weight is times/p rounded at random: its mean is exactly times/p.
func (s *sampler) weight(times int, p float64) uint64 {
	if p >= 1 {
		return uint64(times)
	}
	w := float64(times) / p
	f := math.Floor(w)
	if s.rng.Float64() < w-f {
		f++
	}
	return uint64(f)
}

// minStageRate keeps the answer path's weights within a record's u16.
const minStageRate = 1.0 / 60000

// stageRate is the probability with which the answer path stages a search's
// names in full (1: always), as the last digest set it.
func (in *Insight) stageRate() float64 { return math.Float64frombits(in.stageP.Load()) }

// stageWeight is 1/p rounded at random (u uniform in [0,1)): its mean is
// exactly 1/p.
func stageWeight(p, u float64) uint16 {
	w := 1 / p
	f := math.Floor(w)
	if u < w-f {
		f++
	}
	return uint16(min(f, 0xffff))
}
