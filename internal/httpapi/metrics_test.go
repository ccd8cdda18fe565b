package httpapi

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The listener's counters are declared once (metrics.go): a slip in a tag
// fails here, and the scrape reads the count the listener keeps.
func TestMetricsRegister(t *testing.T) {
	s := New(Options{Registry: &fakeReg{}})
	m := metrics.New("test")
	s.RegisterMetrics(m)
	s.cnt.rendersBusy.Add(2)
	if v, err := m.Value(`pvans_http_limit_hits_total{limit="renders_busy"}`); err != nil || v != 2 {
		t.Fatalf("renders busy %v, %v; want 2", v, err)
	}
}
