package upstream

import "github.com/pvans-project/pvans/internal/metrics"

// RegisterMetrics exposes the counts of Ask (docs/operations.md).
func (p *Pool) RegisterMetrics(m *metrics.Metrics) {
	const help = "Servers that refused to list their names asked directly over TCP for the names clients wait for, by result: asked, or refused because 16 asks were running."
	m.Counter("upstream", "asks_total", help, metrics.Label("result", "asked"), metrics.U64(func() uint64 { return p.AskStats().Asked }))
	m.Counter("upstream", "asks_total", help, metrics.Label("result", "refused"), metrics.U64(func() uint64 { return p.AskStats().Refused }))
}
