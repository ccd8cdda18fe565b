package beacon

import (
	"sync/atomic"

	"github.com/pvans-project/pvans/internal/metrics"
)

// counters are the tracker's counters since New, each declared once
// (metrics.Register).
type counters struct {
	new            metrics.Counter `metric:"pvans_beacon_events_total" label:"kind=new" help:"Server tracker events."`
	changed        metrics.Counter `metric:"pvans_beacon_events_total" label:"kind=changed"`
	sourcesChanged metrics.Counter `metric:"pvans_beacon_events_total" label:"kind=sources_changed"`
	lost           metrics.Counter `metric:"pvans_beacon_events_total" label:"kind=lost"`
	dropped        metrics.Counter `metric:"pvans_beacon_events_total" label:"kind=dropped"` // observations of new endpoints ignored at the limit
	evicted        metrics.Counter `metric:"pvans_beacon_events_total" label:"kind=evicted"` // unproven entries dropped for a new endpoint at the limit

	observed atomic.Uint64 // beacons and discovery replies observed
}

// RegisterMetrics exposes the tracker's counters and gauge
// (docs/operations.md).
func (t *Tracker) RegisterMetrics(m *metrics.Metrics) {
	m.Gauge("beacon", "servers", "Server endpoints tracked from beacons and discovery.", nil, func() float64 { return float64(t.Tracked()) })
	m.Register(&t.stats)
}
