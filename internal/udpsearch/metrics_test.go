package udpsearch

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The search port's counters are declared once (stats.go, forward.go): a
// slip in a tag fails here, and the scrape reads the count the port keeps.
func TestMetricsRegister(t *testing.T) {
	s := New(Options{})
	m := metrics.New("test")
	s.RegisterMetrics(m)
	s.st.hintAddress.Add(2)
	s.st.dropNoTCP.Add(3)
	for series, want := range map[string]float64{
		`pvans_hints_dropped_total{reason="address_mismatch"}`: 2,
		`pvans_udp_drops_total{reason="no_usable_protocol"}`:   3,
	} {
		if v, err := m.Value(series); err != nil || v != want {
			t.Errorf("%s = %v, %v; want %v", series, v, err, want)
		}
	}
}
