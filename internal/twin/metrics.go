package twin

import "github.com/pvans-project/pvans/internal/metrics"

// RegisterMetrics exposes the pairing's counts (docs/operations.md).
func (t *Table) RegisterMetrics(m *metrics.Metrics) {
	st := t.Stats
	m.Gauge("twin", "pairs", "Client UDP search sockets paired now with the same client's TCP name-server connection.", nil, func() float64 { return float64(st().Paired) })
	m.Counter("twin", "pairs_made_total", "Pairs made: a UDP search and the same search over a TCP connection from the same host.", nil, metrics.U64(func() uint64 { return st().PairsMade }))
	m.Counter("twin", "pairs_ended_total", "Pairs ended: the connection closed, or the socket's searches showed up on another connection.", nil, metrics.U64(func() uint64 { return st().PairsEnded }))
	m.Counters("twin", "refused_total", "Pairs not made, by reason.", "reason", map[string]func() uint64{
		"contested":   func() uint64 { return st().Contested },
		"ambiguous":   func() uint64 { return st().Ambiguous },
		"recent_full": func() uint64 { return st().RecentFull },
	})
}
