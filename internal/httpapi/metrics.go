package httpapi

import (
	"sync/atomic"

	"github.com/pvans-project/pvans/internal/metrics"
)

// counters are what the HTTP listener refused, each declared once
// (metrics.Register), and its open connections.
type counters struct {
	acceptErrors metrics.Counter `metric:"pvans_http_accept_errors_total" help:"accept(2) failures on the HTTP port (EMFILE…); each is followed by a back-off of 5 ms doubling to 1 s."`

	rejected  metrics.Counter `metric:"pvans_http_limit_hits_total" label:"limit=max_connections" help:"HTTP connections and requests refused at a bound, by limit."` // closed at accept: MaxConns reached
	perSource metrics.Counter `metric:"pvans_http_limit_hits_total" label:"limit=connections_per_source"`                                                             // closed at accept: MaxConnsPerSource reached
	// POST /v1/discover answered 429; without a JSON content type, or
	// cross-site.
	discoverLimited metrics.Counter `metric:"pvans_http_limit_hits_total" label:"limit=discover_rate"`
	discoverRefused metrics.Counter `metric:"pvans_http_limit_hits_total" label:"limit=discover_not_json"`
	matchRefused    metrics.Counter `metric:"pvans_http_limit_hits_total" label:"limit=match_pattern"` // /v1/names match pattern over the bounds
	bodyTooLarge    metrics.Counter `metric:"pvans_http_limit_hits_total" label:"limit=body_size"`     // request bodies over MaxBodyBytes
	// Listings answered 503: MaxListings already scanning; ListTimeout
	// passed.
	listingsBusy     metrics.Counter `metric:"pvans_http_limit_hits_total" label:"limit=listings_busy"`
	listingsTimedOut metrics.Counter `metric:"pvans_http_limit_hits_total" label:"limit=listing_timeout"`
	waitersBusy      metrics.Counter `metric:"pvans_http_limit_hits_total" label:"limit=waiters_busy"` // GET /v1/changes answered 503: MaxConns/2 already waiting
	hostRefused      metrics.Counter `metric:"pvans_http_limit_hits_total" label:"limit=host"`         // answered 421: a Host pvans is not known by (DNS rebinding)
	// Status page, /v1/servers, /v1/duplicates answered 503: MaxRenders
	// already running.
	rendersBusy metrics.Counter `metric:"pvans_http_limit_hits_total" label:"limit=renders_busy"`

	open atomic.Int64 // connections open now
}

// RegisterMetrics exposes the HTTP listener's bounds (docs/operations.md).
func (s *Service) RegisterMetrics(m *metrics.Metrics) {
	m.Gauge("http", "connections", "Open HTTP connections.", nil, func() float64 { return float64(s.cnt.open.Load()) })
	m.Register(s.cnt)
}
