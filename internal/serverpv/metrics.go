package serverpv

import "github.com/pvans-project/pvans/internal/metrics"

// RegisterMetrics exposes the type-cache bounds (docs/operations.md).
func (p *Provider) RegisterMetrics(m *metrics.Metrics) {
	m.Gauge("serverpv", "cached_type_bytes", "Expanded size of the pvData types clients of the server PV have cached.", nil,
		func() float64 { return float64(p.Stats().CachedTypeBytes) })
	m.Counter("serverpv", "types_refused_total", "Type definitions refused at the type-cache bounds (the request is ignored).", nil,
		metrics.U64(func() uint64 { return p.Stats().TypesRefused }))
}
