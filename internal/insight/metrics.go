package insight

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pvans-project/pvans/internal/metrics"
)

// RegisterMetrics exposes the search-traffic figures (docs/operations.md).
// The window gauges are computed from the summaries at most once a second,
// however many series a scrape reads.
func (in *Insight) RegisterMetrics(m *metrics.Metrics) {
	tot := in.Totals
	m.Counters("insight", "names_total", "Names searched for and answered by the resolver, by result: found (some server claims it) or not_found.", "result", map[string]func() uint64{
		"found":     func() uint64 { return tot().Found },
		"not_found": func() uint64 { return tot().NotFound },
	})
	m.Counter("insight", "dropped_names_total", "Unclaimed names not summarised because the staging buffer (insight.DefaultQueueBytes) was full.", nil,
		metrics.U64(func() uint64 { return tot().Dropped }))
	m.Counter("insight", "sampled_out_names_total", "Unclaimed names left out of the name summaries because more than insight.DefaultDigestNamesPerSecond arrived (the summaries then count a weighted sample).", nil,
		metrics.U64(in.SampledOut))
	m.Counters("insight", "evictions_total", "Keys that lost their summary slot to another (both windows): a steady rise means more distinct keys than slots (insight.names; insight.DefaultClients for clients).", "summary", map[string]func() uint64{
		"names":   func() uint64 { n, _ := in.Evictions(); return n },
		"clients": func() uint64 { _, c := in.Evictions(); return c },
	})
	m.Counters("insight", "anomalies_total", "Beacon anomaly events, by kind (see the events log).", "kind", map[string]func() uint64{
		AnomalyGUIDChurn:      func() uint64 { return in.anomalies(AnomalyGUIDChurn) },
		AnomalyBeaconsStopped: func() uint64 { return in.anomalies(AnomalyBeaconsStopped) },
		AnomalyNotAllowed:     func() uint64 { return in.anomalies(AnomalyNotAllowed) },
	})
	var mu sync.Mutex
	cache := map[string]Gauges{}
	var at time.Time
	get := func(w string) Gauges {
		mu.Lock()
		defer mu.Unlock()
		if now := in.o.Clock.Now(); now.Sub(at) >= time.Second || now.Before(at) {
			for _, w := range Windows {
				cache[w] = in.Gauges(w)
			}
			at = now
		}
		return cache[w]
	}
	for _, w := range Windows {
		lbl := prometheus.Labels{"window": w}
		m.Gauge("insight", "unresolved_names", "Distinct names searched for and not found in the window (at most 2 × insight.names are kept).", lbl,
			func() float64 { return float64(get(w).UnresolvedNames) })
		m.Gauge("insight", "top_client_names_per_second", "Names searched per second by the busiest client in the window.", lbl,
			func() float64 { return get(w).TopNamesPerSecond })
		m.Gauge("insight", "top_client_not_found_per_second", "Highest rate of names searched and not found by any one client in the window.", lbl,
			func() float64 { return get(w).TopMissingPerSecond })
	}
}
