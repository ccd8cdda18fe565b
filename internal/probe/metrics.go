package probe

import (
	"sync/atomic"
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

// counters are the prober's, each declared once, beside its field
// (metrics.Register); counted under p.mu. The plain atomics are not
// exported: tests read them.
type counters struct {
	// Verifications are hints of a new GUID at an endpoint whose server
	// is watched, checked over a fresh TCP connection: confirmed (the
	// endpoint answers with another GUID, or the old watch died and the
	// endpoint answers) or refuted (the old server still answers).
	VerifyConfirmed metrics.Counter `metric:"pvans_probe_verifications_total" label:"result=confirmed" help:"Hints checked over TCP before anything changed, by result: confirmed (the endpoint proved the claimed server: a restart's new GUID, or a search-through answer), refuted (the endpoint answered otherwise, or could not be reached)."`
	VerifyRefuted   metrics.Counter `metric:"pvans_probe_verifications_total" label:"result=refuted"`
	// PingsOverUDP are discovery pings answered over UDP (pvAccessCPP),
	// each proving the GUID of the server pinged.
	PingsOverUDP metrics.Counter `metric:"pvans_probe_pings_over_udp_total" help:"Discovery pings sent over a probe connection and answered over UDP (pvAccessCPP), each proving the server's GUID."`
	// TLSFallbacks are fresh connections to a server's known TLS
	// endpoint that failed (refused, untrusted, another GUID there),
	// the server then being connected to over plain TCP.
	TLSFallbacks metrics.Counter `metric:"pvans_probe_tls_fallbacks_total" help:"Fresh connections to a server's known TLS endpoint that failed (refused, certificate not trusted, another GUID there), the server then connected to over plain TCP."`
	// ThroughForgotten are endpoints known only from search replies
	// forgotten after their retry budget; ThroughDropped, replies naming
	// a new such endpoint not taken because MaxThrough were known.
	ThroughForgotten metrics.Counter `metric:"pvans_probe_search_through_forgotten_total" help:"Endpoints known only from search replies forgotten after their retry budget (probe.DefaultThroughRetries)."`
	ThroughDropped   metrics.Counter `metric:"pvans_probe_search_through_dropped_total" help:"Search replies naming a new endpoint, or asking for a check over TCP, not taken because probe.DefaultMaxThrough were known or being checked."`
	// HintsDeferred are hint-triggered probe requests folded into the
	// next backoff step instead of probing at once (for a watched server
	// that would not list: into its next scheduled retry).
	HintsDeferred metrics.Counter `metric:"pvans_probe_hints_deferred_total" help:"Probe requests from hints (beacons, discovery and search replies) folded into the next backoff step of their endpoint."`

	Probes          atomic.Uint64 // connect-and-list attempts (including re-listings)
	Listed          atomic.Uint64
	Unlistable      atomic.Uint64
	ConnectFailures atomic.Uint64
	Lost            atomic.Uint64
}

// RegisterMetrics exposes the prober's counters (declared above and, for
// the pool, in sched.go) and gauges (docs/operations.md).
func (p *Prober) RegisterMetrics(m *metrics.Metrics) {
	m.Register(&p.stats, p.sched)
	m.Gauge("probe", "tls_watches", "Servers watched over TLS: their listing proved their TLS endpoint (pvans has a keychain), and the watch and the next listings run there.", nil, func() float64 { return float64(p.Stats().WatchingTLS) })
	m.Gauge("probe", "endpoints", "Server endpoints the prober lists, watches or retries.", nil, func() float64 { return float64(p.Stats().Servers) })
	m.Gauge("probe", "search_through_endpoints", "Of pvans_probe_endpoints, those known only from search replies (bounded by probe.DefaultMaxThrough).", nil, func() float64 { return float64(p.Stats().Through) })
	m.Gauge("probe", "waiting", "Probes and confirmations waiting for a slot of the probe pool (probe.DefaultConcurrency).", nil, func() float64 { return float64(p.Stats().Waiting) })
}

// Probes is the connect-and-list attempts started (re-listings too).
func (p *Prober) Probes() uint64 { return p.stats.Probes.Load() }
