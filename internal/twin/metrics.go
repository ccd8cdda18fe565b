package twin

import "github.com/pvans-project/pvans/internal/metrics"

// RegisterMetrics exposes the pairing's counts (docs/operations.md); the
// counters are declared in twin.go.
func (t *Table) RegisterMetrics(m *metrics.Metrics) {
	m.Gauge("twin", "pairs", "Client UDP search sockets paired now with the same client's TCP name-server connection.", nil, func() float64 { return float64(t.Stats().Paired) })
	m.Register(&t.cnt)
}
