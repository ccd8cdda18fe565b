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
	m := metrics.New("test")
	p.RegisterMetrics(m)
	p.asks.refused.Add(2)
	if v, err := m.Value(`pvans_upstream_asks_total{result="refused"}`); err != nil || v != 2 {
		t.Fatalf("asks refused %v, %v; want 2", v, err)
	}
}
