package probe

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The prober's counters are declared once (metrics.go, sched.go): a slip
// in a tag fails here, and the scrape reads the counts the prober keeps.
func TestMetricsRegister(t *testing.T) {
	p := newProber(t, Options{})
	metrics.CheckExported(t, p.RegisterMetrics, map[string]*metrics.Counter{
		`pvans_probe_verifications_total{result="refuted"}`: &p.stats.VerifyRefuted,
		`pvans_probe_throttled_total`:                       &p.sched.throttled,
	})
}
