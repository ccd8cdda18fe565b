package beacon

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The tracker's counters are declared once (metrics.go): a slip in a tag
// fails here, and the scrape reads the count the tracker keeps.
func TestMetricsRegister(t *testing.T) {
	tr := New(Options{})
	m := metrics.New("test")
	tr.RegisterMetrics(m)
	tr.stats.sourcesChanged.Add(2)
	if v, err := m.Value(`pvans_beacon_events_total{kind="sources_changed"}`); err != nil || v != 2 {
		t.Fatalf("sources changed %v, %v; want 2", v, err)
	}
}
