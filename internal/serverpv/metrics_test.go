package serverpv

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The provider's counter is declared once (metrics.go): a slip in its tag
// fails here, and the scrape reads the count the provider keeps.
func TestMetricsRegister(t *testing.T) {
	p := New("test", Limits{})
	m := metrics.New("test")
	p.RegisterMetrics(m)
	p.refused.Add(2)
	if v, err := m.Value(`pvans_serverpv_types_refused_total`); err != nil || v != 2 {
		t.Fatalf("types refused %v, %v; want 2", v, err)
	}
}
