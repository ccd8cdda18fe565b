package httpapi

import "github.com/pvans-project/pvans/internal/metrics"

// RegisterMetrics exposes the HTTP listener's bounds (docs/operations.md).
func (s *Service) RegisterMetrics(m *metrics.Metrics) {
	st := s.Stats
	m.Gauge("http", "connections", "Open HTTP connections.", nil, func() float64 { return float64(st().Open) })
	m.Counter("http", "accept_errors_total", "accept(2) failures on the HTTP port (EMFILE…); each is followed by a back-off of 5 ms doubling to 1 s.",
		nil, metrics.U64(func() uint64 { return st().AcceptErrors }))
	m.Counters("http", "limit_hits_total", "HTTP connections and requests refused at a bound, by limit.", "limit", map[string]func() uint64{
		"max_connections":        func() uint64 { return st().Rejected },
		"connections_per_source": func() uint64 { return st().PerSourceRejected },
		"discover_rate":          func() uint64 { return st().DiscoverLimited },
		"discover_not_json":      func() uint64 { return st().DiscoverRefused },
		"match_pattern":          func() uint64 { return st().MatchRefused },
		"body_size":              func() uint64 { return st().BodyTooLarge },
		"listings_busy":          func() uint64 { return st().ListingsBusy },
		"listing_timeout":        func() uint64 { return st().ListingsTimedOut },
		"waiters_busy":           func() uint64 { return st().WaitersBusy },
		"host":                   func() uint64 { return st().HostRefused },
		"renders_busy":           func() uint64 { return st().RendersBusy },
	})
}
