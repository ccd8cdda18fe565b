package resolver

import "github.com/pvans-project/pvans/internal/metrics"

// RegisterMetrics exposes the resolver's Stats (docs/operations.md).
func (r *Resolver) RegisterMetrics(m *metrics.Metrics) {
	st := r.Stats
	m.Gauge("resolver", "waiters", "Unresolved (connection or UDP reply socket, CID) pairs waiting for a push or a search-through answer.", nil, func() float64 { return float64(st().Waiting) })
	m.Counter("resolver", "pushes_total", "Waiters answered by push when their name was learned.", nil, metrics.U64(func() uint64 { return st().Pushed }))
	m.AccessDenied("name", func() uint64 { return st().Denied })
	m.Counter("resolver", "told_evicted_total", "Answers remembered for the restart fan-out dropped at their bounds (8192 a server, 65,536 in all), oldest first.",
		nil, metrics.U64(func() uint64 { return st().ToldEvicted }))
	m.Counters("resolver", "reanswers_total", "CIDs answered again, without a new search, because the server they were told was gone when another claimed their name (restart fan-out), by transport.", "via", map[string]func() uint64{
		"tcp": func() uint64 { return st().ReanswersTCP },
		"udp": func() uint64 { return st().ReanswersUDP },
	})
	m.Gauge("resolver", "told", "Recent answers remembered for the restart fan-out.", nil, func() float64 { return float64(st().Told) })
	m.Counters("resolver", "limit_hits_total", "Waiters not remembered and names refused at a bound, by limit.", "limit", map[string]func() uint64{
		"waiters_per_connection": func() uint64 { return st().WaitDrops },
		"waiters_per_source":     func() uint64 { return st().WaitDropsSource },
		"waiters_total":          func() uint64 { return st().WaitDropsTotal },
		"waiters_udp":            func() uint64 { return st().WaitDropsUDP },
		"name_length":            func() uint64 { return st().NamesTooLong },
	})
}
