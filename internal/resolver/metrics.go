package resolver

import (
	"sync/atomic"

	"github.com/pvans-project/pvans/internal/metrics"
)

// counters are the resolver's counters, each declared once
// (metrics.Register); the plain atomics are not exported: tests read them.
type counters struct {
	pushed      metrics.Counter `metric:"pvans_resolver_pushes_total" help:"Waiters answered by push when their name was learned."`
	denied      metrics.Counter `metric:"pvans_access_denied_total" label:"what=name"` // refused by Options.NameAllowed
	toldEvicted metrics.Counter `metric:"pvans_resolver_told_evicted_total" help:"Answers remembered for the restart fan-out dropped at their bounds (8192 a server, 65,536 in all), oldest first."`
	// reTCP and reUDP: CIDs answered again because the server they were
	// told was gone when another claimed their name (told.go).
	reTCP metrics.Counter `metric:"pvans_resolver_reanswers_total" label:"via=tcp" help:"CIDs answered again, without a new search, because the server they were told was gone when another claimed their name (restart fan-out), by transport."`
	reUDP metrics.Counter `metric:"pvans_resolver_reanswers_total" label:"via=udp"`
	// Waiters refused at MaxWaitsPerClient, MaxWaitsPerSource, MaxWaiters
	// and MaxUDPWaiters; names longer than MaxNameBytes.
	drops       metrics.Counter `metric:"pvans_resolver_limit_hits_total" label:"limit=waiters_per_connection" help:"Waiters not remembered and names refused at a bound, by limit."`
	dropsSource metrics.Counter `metric:"pvans_resolver_limit_hits_total" label:"limit=waiters_per_source"`
	dropsTotal  metrics.Counter `metric:"pvans_resolver_limit_hits_total" label:"limit=waiters_total"`
	dropsUDP    metrics.Counter `metric:"pvans_resolver_limit_hits_total" label:"limit=waiters_udp"`
	tooLong     metrics.Counter `metric:"pvans_resolver_limit_hits_total" label:"limit=name_length"`

	lookups, names, misses atomic.Uint64 // batches, names looked up, names nobody claimed
	expired                atomic.Uint64 // waiters expired
}

// RegisterMetrics exposes the resolver's counters and gauges
// (docs/operations.md).
func (r *Resolver) RegisterMetrics(m *metrics.Metrics) {
	st := r.Stats
	m.Gauge("resolver", "waiters", "Unresolved (connection or UDP reply socket, CID) pairs waiting for a push or a search-through answer.", nil, func() float64 { return float64(st().Waiting) })
	m.Gauge("resolver", "told", "Recent answers remembered for the restart fan-out.", nil, func() float64 { return float64(st().Told) })
	m.Register(&r.st)
}
