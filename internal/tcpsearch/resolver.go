package tcpsearch

import (
	"net/netip"

	"github.com/pvans-project/pvans/internal/answer"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
)

// The resolver's result types, used as they are: a Batch is reused across
// lookups, so converting it would cost a copy per search.
type (
	Endpoint = resolver.Endpoint
	Group    = resolver.Group
	Batch    = resolver.Batch
	Offer    = resolver.Offer
)

// Resolver is what the listener needs from internal/resolver; tests use
// fakes. Wrap a *resolver.Resolver with FromResolver. Its Lookup is
// answer.Resolver's, declared there once for both transports.
type Resolver interface {
	answer.Resolver
	// NewClient returns the waiter set of one connection. push is called
	// (from any goroutine, possibly under the resolver's lock) when waited
	// names resolve: it must not block nor call back into the resolver.
	// src is the client's address: waiters are bounded per source too.
	NewClient(src netip.Addr, push func(g Group)) Waiter
}

// Waiter is one connection's set of unresolved (CID, name) pairs.
type Waiter interface {
	// Wait remembers q[i] for every i in missing; it copies the names.
	// off is the search's offer: a push answering these names is decided
	// for it (Group.Offer).
	Wait(q []pva.SearchName, missing []int, off Offer)
	// Told remembers that group gi of b (looked up for q, by a search
	// whose offer was off) was sent on this connection: the restart
	// fan-out answers those CIDs again, for that offer, if their server
	// is replaced (resolver, told.go).
	Told(q []pva.SearchName, b *Batch, gi int, off Offer)
	Close()
}

// FromResolver adapts the daemon's resolver.
func FromResolver(r *resolver.Resolver) Resolver { return resolverAdapter{r} }

type resolverAdapter struct{ *resolver.Resolver }

func (a resolverAdapter) NewClient(src netip.Addr, push func(Group)) Waiter {
	return a.Resolver.NewClientFrom(src, push)
}
