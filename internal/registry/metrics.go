package registry

import "github.com/pvans-project/pvans/internal/metrics"

// RegisterMetrics exposes the registry's counts and Stats (docs/operations.md).
func (r *Registry) RegisterMetrics(m *metrics.Metrics) {
	m.Gauge("registry", "servers", "Servers in the registry.", nil, func() float64 { return float64(r.Counts().Servers) })
	m.Gauge("registry", "names", "Distinct names answered for.", nil, func() float64 { return float64(r.Counts().Names) })
	m.Gauge("registry", "duplicate_names", "Names claimed by more than one server.", nil, func() float64 { return float64(r.Counts().DuplicateNames) })
	m.Gauge("registry", "unverified_servers", "Servers loaded from the snapshot and not yet confirmed.", nil, func() float64 { return float64(r.Counts().Unverified) })
	m.Counter("registry", "identity_refused_total", "Listings refused: at the endpoint of a server proven over TLS, a server that did not prove the same certificate identity.",
		nil, metrics.U64(func() uint64 { return r.Stats().IdentityRefused }))
	m.Counters("registry", "limit_drops_total", "Registrations refused at a bound.", "what", map[string]func() uint64{
		"servers":     func() uint64 { return r.Stats().ServerLimitDrops },
		"names":       func() uint64 { return r.Stats().NameLimitDrops },
		"name_length": func() uint64 { return r.Stats().NameLengthDrops },
	})
}
