package upstream

import "github.com/pvans-project/pvans/internal/metrics"

// RegisterMetrics exposes the counts of Ask (docs/operations.md), declared
// in ask.go.
func (p *Pool) RegisterMetrics(m *metrics.Metrics) {
	m.Register(&p.asks)
}
