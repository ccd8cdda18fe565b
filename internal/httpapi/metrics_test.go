package httpapi

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The listener's counters are declared once (metrics.go): a slip in a tag
// fails here, and the scrape reads the count the listener keeps.
func TestMetricsRegister(t *testing.T) {
	s := New(Options{Registry: &fakeReg{}})
	metrics.CheckExported(t, s.RegisterMetrics, map[string]*metrics.Counter{`pvans_http_limit_hits_total{limit="renders_busy"}`: &s.cnt.rendersBusy})
}
