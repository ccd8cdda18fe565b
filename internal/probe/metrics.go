package probe

import (
	"time"

	"github.com/pvans-project/pvans/internal/metrics"
)

// MetricsObserver registers the probe metrics (docs/operations.md) and
// returns the Options.Observe hook that feeds them.
func MetricsObserver(m *metrics.Metrics) func(result string, took time.Duration) {
	total := m.CounterVec("probe", "total", "Probes (listings of a server's names through its server RPC), by result: ok, failed (connect, list or timeout error), refused (the server does not offer the listing).", "result")
	duration := m.Histogram("probe", "duration_seconds", "Time to connect to a server and list its names.",
		[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30})
	for _, r := range []string{"ok", "failed", "refused"} {
		total.WithLabelValues(r) // export zeros, so rate() works from the start
	}
	duration.WithLabelValues()
	return func(result string, took time.Duration) {
		total.WithLabelValues(result).Inc()
		duration.WithLabelValues().Observe(took.Seconds())
	}
}

// RegisterMetrics exposes the prober's verification counters
// (docs/operations.md).
func (p *Prober) RegisterMetrics(m *metrics.Metrics) {
	m.Counters("probe", "verifications_total", "Hints checked over TCP before anything changed, by result: confirmed (the endpoint proved the claimed server: a restart's new GUID, or a search-through answer), refuted (the endpoint answered otherwise, or could not be reached).", "result", map[string]func() uint64{
		"confirmed": func() uint64 { return p.Stats().VerifyConfirmed },
		"refuted":   func() uint64 { return p.Stats().VerifyRefuted },
	})
	m.Counter("probe", "pings_over_udp_total", "Discovery pings sent over a probe connection and answered over UDP (pvAccessCPP), each proving the server's GUID.", nil, metrics.U64(func() uint64 { return p.Stats().PingsOverUDP }))
	m.Gauge("probe", "tls_watches", "Servers watched over TLS: their listing proved their TLS endpoint (pvans has a keychain), and the watch and the next listings run there.", nil, func() float64 { return float64(p.Stats().WatchingTLS) })
	m.Counter("probe", "tls_fallbacks_total", "Fresh connections to a server's known TLS endpoint that failed (refused, certificate not trusted, another GUID there), the server then connected to over plain TCP.", nil, metrics.U64(func() uint64 { return p.Stats().TLSFallbacks }))
	m.Gauge("probe", "endpoints", "Server endpoints the prober lists, watches or retries.", nil, func() float64 { return float64(p.Stats().Servers) })
	m.Gauge("probe", "search_through_endpoints", "Of pvans_probe_endpoints, those known only from search replies (bounded by probe.DefaultMaxThrough).", nil, func() float64 { return float64(p.Stats().Through) })
	m.Gauge("probe", "waiting", "Probes and confirmations waiting for a slot of the probe pool (probe.concurrency).", nil, func() float64 { return float64(p.Stats().Waiting) })
	m.Counter("probe", "throttled_total", "Probes that waited for a slot while one was free: their server's host held its share (probe.DefaultPerHostConcurrency), or retries of failed probes held half the pool.", nil, metrics.U64(func() uint64 { return p.Stats().Throttled }))
	m.Counter("probe", "search_through_forgotten_total", "Endpoints known only from search replies forgotten after their retry budget (probe.DefaultThroughRetries).", nil, metrics.U64(func() uint64 { return p.Stats().ThroughForgotten }))
	m.Counter("probe", "search_through_dropped_total", "Search replies naming a new endpoint, or asking for a check over TCP, not taken because probe.DefaultMaxThrough were known or being checked.", nil, metrics.U64(func() uint64 { return p.Stats().ThroughDropped }))
	m.Counter("probe", "hints_deferred_total", "Probe requests from hints (beacons, discovery and search replies) folded into the next backoff step of their endpoint.", nil, metrics.U64(func() uint64 { return p.Stats().HintsDeferred }))
}
