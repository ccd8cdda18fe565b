package serverpv

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The provider's counter is declared once (metrics.go): a slip in its tag
// fails here, and the scrape reads the count the provider keeps.
func TestMetricsRegister(t *testing.T) {
	p := New("test", Limits{})
	metrics.CheckExported(t, p.RegisterMetrics, map[string]*metrics.Counter{`pvans_serverpv_types_refused_total`: &p.refused})
}
