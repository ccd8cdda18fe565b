//go:build !race

package searchring

import "testing"

// TestSteadyStateTrafficMatchesSpec at the scale of the spec's figure.
// (Not under -race: 100,000 names take ~20 s under the race detector and
// exercise no concurrency; the 10,000 row runs under it.)
func TestSteadyStateTrafficMatchesSpecAtScale(t *testing.T) { steadyState(t, 100_000) }
