package tcpsearch

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// The listener's counters are declared once (metrics.go, and the
// connections' in pvaconn): a slip in a tag fails here, and the scrape
// reads the counts the listener keeps.
func TestMetricsRegister(t *testing.T) {
	s := New(Options{}, nil)
	metrics.CheckExported(t, s.RegisterMetrics, map[string]*metrics.Counter{
		`pvans_tcp_limit_hits_total{limit="rate_limited"}`: &s.cnt.rateLimited,
		`pvans_tcp_limit_hits_total{limit="idle_timeout"}`: &s.conn.IdleTimeouts,
		`pvans_repeat_names_evicted_total{via="tcp"}`:      &s.cnt.repeatsEvicted,
	})
}
