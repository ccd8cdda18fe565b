package dnswatch

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The watcher's counters are declared once (metrics.go): a slip in a tag
// fails here, and the scrape reads the count the watcher keeps.
func TestMetricsRegister(t *testing.T) {
	w := New(Options{})
	metrics.CheckExported(t, w.RegisterMetrics, map[string]*metrics.Counter{`pvans_dns_dropped_total{what="addresses"}`: &w.addrsDropped})
}
