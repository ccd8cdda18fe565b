package registry

import (
	"sync/atomic"

	"github.com/pvans-project/pvans/internal/metrics"
)

// counters are the registry's counters, each declared once
// (metrics.Register); the plain atomics are not exported: tests read them.
type counters struct {
	identityRefused metrics.Counter `metric:"pvans_registry_identity_refused_total" help:"Listings refused: at the endpoint of a server proven over TLS, a server that did not prove the same certificate identity."`
	// Servers refused at MaxServers, claims at MaxNames, names longer
	// than MaxNameBytes dropped.
	serverLimit metrics.Counter `metric:"pvans_registry_limit_drops_total" label:"what=servers" help:"Registrations refused at a bound."`
	nameLimit   metrics.Counter `metric:"pvans_registry_limit_drops_total" label:"what=names"`
	nameLength  metrics.Counter `metric:"pvans_registry_limit_drops_total" label:"what=name_length"`

	dups          atomic.Uint64 // claims recorded as duplicates
	takeovers     atomic.Uint64 // names passed to another claimant when the holder let go
	expired       atomic.Uint64 // snapshot servers dropped unconfirmed
	replaced      atomic.Uint64 // servers replaced by a new GUID a TCP listing proved at their endpoint
	hintsRefused  atomic.Uint64 // UpsertServer hints that named a held endpoint or moved a server
	guidElsewhere atomic.Uint64 // listings refused: the GUID is registered at another endpoint
}

// RegisterMetrics exposes the registry's counts and counters
// (docs/operations.md).
func (r *Registry) RegisterMetrics(m *metrics.Metrics) {
	m.Gauge("registry", "servers", "Servers in the registry.", nil, func() float64 { return float64(r.Counts().Servers) })
	m.Gauge("registry", "names", "Distinct names answered for.", nil, func() float64 { return float64(r.Counts().Names) })
	m.Gauge("registry", "duplicate_names", "Names claimed by more than one server.", nil, func() float64 { return float64(r.Counts().DuplicateNames) })
	m.Gauge("registry", "unverified_servers", "Servers loaded from the snapshot and not yet confirmed.", nil, func() float64 { return float64(r.Counts().Unverified) })
	m.Register(&r.st)
}
