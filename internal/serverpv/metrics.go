package serverpv

import "github.com/pvans-project/pvans/internal/metrics"

// counters are the provider's counters, each declared once
// (metrics.Register).
type counters struct {
	refused metrics.Counter `metric:"pvans_serverpv_types_refused_total" help:"Type definitions refused at the type-cache bounds (the request is ignored)."`
}

// RegisterMetrics exposes the type-cache bounds (docs/operations.md).
func (p *Provider) RegisterMetrics(m *metrics.Metrics) {
	m.Gauge("serverpv", "cached_type_bytes", "Expanded size of the pvData types clients of the server PV have cached.", nil,
		func() float64 { return float64(p.Stats().CachedTypeBytes) })
	m.Register(&p.counters)
}
