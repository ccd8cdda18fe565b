package resolver

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The resolver's counters are declared once (metrics.go): a slip in a tag
// fails here, and the scrape reads the count the resolver keeps.
func TestMetricsRegister(t *testing.T) {
	var r Resolver
	metrics.CheckExported(t, r.RegisterMetrics, map[string]*metrics.Counter{`pvans_resolver_reanswers_total{via="udp"}`: &r.st.reUDP})
}
