package upstream

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The pool's counters are declared once (ask.go): a slip in a tag fails
// here, and the scrape reads the count the pool keeps.
func TestMetricsRegister(t *testing.T) {
	p := New(Options{})
	defer p.Close()
	metrics.CheckExported(t, p.RegisterMetrics, map[string]*metrics.Counter{`pvans_upstream_asks_total{result="refused"}`: &p.asks.refused})
}
