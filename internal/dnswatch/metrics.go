package dnswatch

import "github.com/pvans-project/pvans/internal/metrics"

// RegisterMetrics exposes the watcher's Stats (docs/operations.md).
func (w *Watcher) RegisterMetrics(m *metrics.Metrics) {
	st := w.Stats
	m.Gauge("dns", "names", "Host names in the address lists followed in DNS (dns.refresh).", nil, func() float64 { return float64(st().Names) })
	m.Counter("dns", "lookups_total", "Host name lookups finished.", nil, metrics.U64(func() uint64 { return st().Lookups }))
	m.Counter("dns", "lookup_failures_total", "Host name lookups that failed or found no address; the last answer was kept.", nil, metrics.U64(func() uint64 { return st().Failures }))
	m.Counter("dns", "changes_total", "Lookups whose addresses differed from the last answer.", nil, metrics.U64(func() uint64 { return st().Changes }))
	m.Counters("dns", "dropped_total", "What DNS following left out, by bound: names beyond dnswatch.DefaultMaxNames (per round), addresses beyond dnswatch.DefaultMaxAddresses.", "what", map[string]func() uint64{
		"names":     func() uint64 { return st().NamesDropped },
		"addresses": func() uint64 { return st().AddressDropped },
	})
}
