package relay

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The relay's counters are declared once (metrics.go): a slip in a tag
// fails here, and the scrape reads the count the relay keeps.
func TestMetricsRegister(t *testing.T) {
	r := New(Options{})
	metrics.CheckExported(t, r.RegisterMetrics, map[string]*metrics.Counter{`pvans_relay_dropped_total{reason="second_hand"}`: &r.secondHand})
}
