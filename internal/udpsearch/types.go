package udpsearch

import (
	"net/netip"

	"github.com/pvans-project/pvans/internal/answer"
	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
)

// Resolver looks up all names of one search in one go (*resolver.Resolver
// is one), on the receive goroutine for every search reaching the host
// (answer.Resolver says what it must not do).
type Resolver = answer.Resolver

// UDPWaiter is a Resolver that also searches through, on a UDP searcher's
// behalf, the names nobody listed (*resolver.Resolver is one): the
// searcher whose replies go to to, the names of q at missing, the
// search's offer (a push is decided for it). Same rules as Lookup; it
// bounds what it keeps.
type UDPWaiter interface {
	WaitUDP(to netip.AddrPort, q []pva.SearchName, missing []int, off resolver.Offer)
}

// Teller is a Resolver that remembers answers for the restart fan-out
// (*resolver.Resolver is one): the handler tells it each answer sent to
// a reply address over UDP (resolver.Resolver.ToldUDP).
type Teller interface {
	ToldUDP(d resolver.UDPDest, q []pva.SearchName, b *resolver.Batch, gi int, sent []uint32, off resolver.Offer)
}

// SearchObserver is told about every search the resolver answered
// (*insight.Insight is one), on the receive goroutine (answer.Observer).
type SearchObserver = answer.Observer

// BeaconSink receives server sightings (*beacon.Tracker is one). Called
// from both receive goroutines; it must be safe for concurrent use and must
// not block.
type BeaconSink interface {
	Observe(beacon.Observation)
}
