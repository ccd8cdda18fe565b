package dnswatch

import "github.com/pvans-project/pvans/internal/metrics"

// counters are the watcher's counters, each declared once
// (metrics.Register).
type counters struct {
	lookups  metrics.Counter `metric:"pvans_dns_lookups_total" help:"Host name lookups finished."`
	failures metrics.Counter `metric:"pvans_dns_lookup_failures_total" help:"Host name lookups that failed or found no address; the last answer was kept."`
	changes  metrics.Counter `metric:"pvans_dns_changes_total" help:"Lookups whose addresses differed from the last answer."`
	// Names not followed beyond MaxNames (per round); addresses beyond
	// MaxAddresses dropped.
	namesDropped metrics.Counter `metric:"pvans_dns_dropped_total" label:"what=names" help:"What DNS following left out, by bound: names beyond dnswatch.DefaultMaxNames (per round), addresses beyond dnswatch.DefaultMaxAddresses."`
	addrsDropped metrics.Counter `metric:"pvans_dns_dropped_total" label:"what=addresses"`
}

// RegisterMetrics exposes the watcher's counters and gauge
// (docs/operations.md).
func (w *Watcher) RegisterMetrics(m *metrics.Metrics) {
	m.Gauge("dns", "names", "Host names in the address lists followed in DNS (dns.refresh).", nil, func() float64 { return float64(w.Names()) })
	m.Register(&w.counters)
}
