package registry

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The registry's counters are declared once (metrics.go): a slip in a tag
// fails here, and the scrape reads the count the registry keeps.
func TestMetricsRegister(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	m := metrics.New("test")
	r.RegisterMetrics(m)
	r.st.nameLength.Add(2)
	if v, err := m.Value(`pvans_registry_limit_drops_total{what="name_length"}`); err != nil || v != 2 {
		t.Fatalf("names too long %v, %v; want 2", v, err)
	}
}
