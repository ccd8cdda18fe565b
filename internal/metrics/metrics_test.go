package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pvans-project/pvans/internal/buildinfo"
)

func TestFuncMetricsAreScraped(t *testing.T) {
	m := New("1.2.3")
	b := buildinfo.Read()
	var n atomic.Uint64
	m.Counter("tcp", "searches_total", "TCP search messages received.", nil, U64(n.Load))
	m.Gauge("registry", "names", "Names held.", prometheus.Labels{"state": "held"}, func() float64 { return 42 })
	h := m.Histogram("probe", "duration_seconds", "Probe duration.", []float64{0.1, 1}, "result")
	h.WithLabelValues("ok").Observe(0.05)
	n.Add(7)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`pvans_tcp_searches_total 7`,
		`pvans_registry_names{state="held"} 42`,
		`pvans_probe_duration_seconds_bucket{result="ok",le="0.1"} 1`,
		// The labels `pvans version` prints.
		fmt.Sprintf(`pvans_build_info{build_date=%q,commit=%q,goversion=%q,version="1.2.3"} 1`, b.Date, b.Commit, b.GoVersion),
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("missing %q", want)
		}
	}
}
