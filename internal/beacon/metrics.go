package beacon

import "github.com/pvans-project/pvans/internal/metrics"

// RegisterMetrics exposes the tracker's Stats (docs/operations.md).
func (t *Tracker) RegisterMetrics(m *metrics.Metrics) {
	st := t.Stats
	m.Gauge("beacon", "servers", "Server endpoints tracked from beacons and discovery.", nil, func() float64 { return float64(st().Tracked) })
	m.Counters("beacon", "events_total", "Server tracker events.", "kind", map[string]func() uint64{
		"new":             func() uint64 { return st().New },
		"changed":         func() uint64 { return st().Changed },
		"sources_changed": func() uint64 { return st().SourcesChanged },
		"lost":            func() uint64 { return st().Lost },
		"dropped":         func() uint64 { return st().Dropped },
		"evicted":         func() uint64 { return st().Evicted },
	})
}
