package twin

import (
	"testing"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
)

// The table's counters are declared once (twin.go): a slip in a tag fails
// here, and the scrape reads the count the table keeps.
func TestMetricsRegister(t *testing.T) {
	tb := New(clock.Real{}, Options{})
	m := metrics.New("test")
	tb.RegisterMetrics(m)
	tb.cnt.RecentFull.Add(2)
	if v, err := m.Value(`pvans_twin_refused_total{reason="recent_full"}`); err != nil || v != 2 {
		t.Fatalf("recent full %v, %v; want 2", v, err)
	}
}
