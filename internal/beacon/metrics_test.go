package beacon

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The tracker's counters are declared once (metrics.go): a slip in a tag
// fails here, and the scrape reads the count the tracker keeps.
func TestMetricsRegister(t *testing.T) {
	tr := New(Options{})
	metrics.CheckExported(t, tr.RegisterMetrics, map[string]*metrics.Counter{`pvans_beacon_events_total{kind="sources_changed"}`: &tr.stats.sourcesChanged})
}
