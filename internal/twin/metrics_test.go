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
	metrics.CheckExported(t, tb.RegisterMetrics, map[string]*metrics.Counter{`pvans_twin_refused_total{reason="recent_full"}`: &tb.cnt.RecentFull})
}
