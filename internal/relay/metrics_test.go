package relay

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The relay's counters are declared once (metrics.go): a slip in a tag
// fails here, and the scrape reads the count the relay keeps.
func TestMetricsRegister(t *testing.T) {
	r := New(Options{})
	m := metrics.New("test")
	r.RegisterMetrics(m)
	r.secondHand.Add(2)
	if v, err := m.Value(`pvans_relay_dropped_total{reason="second_hand"}`); err != nil || v != 2 {
		t.Fatalf("second-hand drops %v, %v; want 2", v, err)
	}
}
