package searchring

import (
	"strconv"

	"github.com/pvans-project/pvans/internal/metrics"
)

// RegisterMetrics exposes the ring's Stats and bucket occupancy
// (docs/operations.md).
func (r *Ring) RegisterMetrics(m *metrics.Metrics) {
	st := r.Stats
	m.Gauge("searchring", "channels", "Distinct names being searched through.", nil, func() float64 { return float64(st().Searching) })
	for i := 0; i < Buckets; i++ {
		m.Gauge("searchring", "bucket_channels", "Channels per ring bucket (0 = due next tick).", metrics.Label("bucket", strconv.Itoa(i)),
			func() float64 { return float64(r.Occupancy()[i]) })
	}
	m.Counter("searchring", "datagrams_total", "Search datagrams built by the ring (each goes to every destination).", nil, metrics.U64(func() uint64 { return st().Datagrams }))
	m.Counter("searchring", "names_searched_total", "Names packed into search datagrams.", nil, metrics.U64(func() uint64 { return st().NamesSearched }))
	m.Counter("searchring", "replies_total", "Search responses processed by the ring.", nil, metrics.U64(func() uint64 { return st().Replies }))
	m.Counter("searchring", "duplicates_total", "Claims by a second server for a name already resolved.", nil, metrics.U64(func() uint64 { return st().Duplicates }))
}
