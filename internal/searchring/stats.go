package searchring

import (
	"sync/atomic"

	"github.com/pvans-project/pvans/internal/metrics"
)

// counters are the ring's counters, each declared once (metrics.Register).
// The plain atomics are not exported: tests read them.
type counters struct {
	datagrams     metrics.Counter `metric:"pvans_searchring_datagrams_total" help:"Search datagrams built by the ring (each goes to every destination)."`
	namesSearched metrics.Counter `metric:"pvans_searchring_names_searched_total" help:"Names packed into search datagrams."`
	replies       metrics.Counter `metric:"pvans_searchring_replies_total" help:"Search responses processed by the ring."`
	// unmatched also counts the claims of unknownCID.
	unmatched    metrics.Counter `metric:"pvans_hints_dropped_total" label:"reason=unmatched"`
	thirdParty   metrics.Counter `metric:"pvans_hints_dropped_total" label:"reason=tcp_third_party"`
	duplicates   metrics.Counter `metric:"pvans_searchring_duplicates_total" help:"Claims by a second server for a name already resolved."`
	pokes        metrics.Counter `metric:"pvans_searchring_pokes_total" label:"result=accepted" help:"Hurry-up requests (new server seen, name server validated, operator), by result: accepted, or ignored during the 30 s hold-off or a fast revolution."`
	pokesIgnored metrics.Counter `metric:"pvans_searchring_pokes_total" label:"result=ignored"`
	// refused: names not searched through, MaxChannels reached; limited:
	// datagrams not sent, over DatagramsPerSecond; claimsForgotten: claims
	// forgotten, oldest first, beyond the bound.
	refused         metrics.Counter `metric:"pvans_searchring_limit_hits_total" label:"limit=names" help:"Search-through work refused at a bound, by limit: names (a name wanted beyond searchring.DefaultMaxChannels is not searched through), datagrams (a datagram over searchring.DefaultDatagramsPerSecond is not sent), claims (the oldest remembered claim of a server on a name forgotten beyond searchring.DefaultMaxChannels)."`
	limited         metrics.Counter `metric:"pvans_searchring_limit_hits_total" label:"limit=datagrams"`
	claimsForgotten metrics.Counter `metric:"pvans_searchring_limit_hits_total" label:"limit=claims"`
	reentered       metrics.Counter `metric:"pvans_searchring_reentered_total" help:"Resolved names put back into search because the server they were resolved to was lost."`

	upstreamSent    atomic.Uint64 // copies appended to ready name-server connections
	upstreamSkipped atomic.Uint64 // copies skipped because the connection was backlogged
	resolved        atomic.Uint64 // names resolved by a first positive claim
	ignoredGUID     atomic.Uint64 // replies from an ignored server
	negative        atomic.Uint64 // found=false replies (never stop a search)
	badProtocol     atomic.Uint64 // replies for a protocol we did not search for
	unusable        atomic.Uint64 // replies naming no usable endpoint (UDP port 0)
	unknownCID      atomic.Uint64 // claimed CIDs of no current Channel
	swept           atomic.Uint64 // abandoned Channels discarded
}

// Stats are the ring's gauges.
type Stats struct {
	Channels  int // distinct names remembered: searching, or resolved and not yet swept
	Searching int // distinct names being searched (in the ring or the initial list)
	Initial   int // names waiting for the 10 ms coalesced first search
	Dropped   int // Channels with no waiter, waiting for the sweep
}

// Stats returns the gauges now.
func (r *Ring) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Stats{Channels: len(r.byName), Searching: r.searching, Initial: r.nInitial, Dropped: len(r.dropped)}
}

// Occupancy is the number of searching Channels in each bucket, relative
// to the cursor: [0] is searched at the next tick, [i] at the (i+1)-th.
// Stale entries of Channels that left the ring are not counted.
func (r *Ring) Occupancy() [Buckets]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var o [Buckets]int
	for i := range o {
		o[i] = r.live[(r.cursor+i)%Buckets]
	}
	return o
}
