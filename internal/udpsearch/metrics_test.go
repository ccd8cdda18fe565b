package udpsearch

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The search port's counters are declared once (stats.go, forward.go): a
// slip in a tag fails here, and the scrape reads the count the port keeps.
func TestMetricsRegister(t *testing.T) {
	s := New(Options{})
	metrics.CheckExported(t, s.RegisterMetrics, map[string]*metrics.Counter{
		`pvans_hints_dropped_total{reason="address_mismatch"}`: &s.st.hintAddress,
		`pvans_udp_drops_total{reason="no_usable_protocol"}`:   &s.st.dropNoTCP,
		`pvans_repeat_names_evicted_total{via="udp"}`:          &s.st.repeatsEvicted,
	})
}
