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
	metrics.CheckExported(t, r.RegisterMetrics, map[string]*metrics.Counter{`pvans_registry_limit_drops_total{what="name_length"}`: &r.st.nameLength})
}
