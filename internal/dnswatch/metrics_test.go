package dnswatch

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The watcher's counters are declared once (metrics.go): a slip in a tag
// fails here, and the scrape reads the count the watcher keeps.
func TestMetricsRegister(t *testing.T) {
	w := New(Options{})
	m := metrics.New("test")
	w.RegisterMetrics(m)
	w.addrsDropped.Add(2)
	if v, err := m.Value(`pvans_dns_dropped_total{what="addresses"}`); err != nil || v != 2 {
		t.Fatalf("addresses dropped %v, %v; want 2", v, err)
	}
}
