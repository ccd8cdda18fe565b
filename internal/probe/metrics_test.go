package probe

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The prober's counters are declared once (metrics.go, sched.go): a slip
// in a tag fails here, and the scrape reads the counts the prober keeps.
func TestMetricsRegister(t *testing.T) {
	p := newProber(t, Options{})
	m := metrics.New("test")
	p.RegisterMetrics(m)
	p.stats.VerifyRefuted.Add(2)
	p.sched.throttled.Add(3)
	for series, want := range map[string]float64{
		`pvans_probe_verifications_total{result="refuted"}`: 2,
		`pvans_probe_throttled_total`:                       3,
	} {
		if v, err := m.Value(series); err != nil || v != want {
			t.Errorf("%s = %v, %v; want %v", series, v, err, want)
		}
	}
}
