package resolver

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The resolver's counters are declared once (metrics.go): a slip in a tag
// fails here, and the scrape reads the count the resolver keeps.
func TestMetricsRegister(t *testing.T) {
	var r Resolver
	m := metrics.New("test")
	r.RegisterMetrics(m)
	r.st.reUDP.Add(3)
	if v, err := m.Value(`pvans_resolver_reanswers_total{via="udp"}`); err != nil || v != 3 {
		t.Fatalf("UDP re-answers %v, %v; want 3", v, err)
	}
}
