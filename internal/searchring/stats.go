package searchring

import "sync/atomic"

type counters struct {
	namesSearched, datagrams      atomic.Uint64
	upstreamSent, upstreamSkipped atomic.Uint64
	replies, resolved, duplicates atomic.Uint64
	ignoredGUID, negative         atomic.Uint64
	badProtocol, unusable         atomic.Uint64
	unknownCID, unmatched         atomic.Uint64
	pokes, pokesIgnored           atomic.Uint64
	reentered, swept              atomic.Uint64
	refused, limited              atomic.Uint64
	thirdParty, claimsForgotten   atomic.Uint64
}

// Stats is a snapshot of the ring's counters (monotonic) and gauges.
type Stats struct {
	// Gauges.
	Channels  int // distinct names remembered: searching, or resolved and not yet swept
	Searching int // distinct names being searched (in the ring or the initial list)
	Initial   int // names waiting for the 10 ms coalesced first search
	Dropped   int // Channels with no waiter, waiting for the sweep

	// Counters.
	NamesSearched   uint64 // (CID, name) entries packed; each goes to every destination
	Datagrams       uint64 // search datagrams built; each goes to every destination
	UpstreamSent    uint64 // copies appended to ready name-server connections
	UpstreamSkipped uint64 // copies skipped because the connection was backlogged
	Replies         uint64 // CMD_SEARCH_RESPONSE seen by OnReply
	Resolved        uint64 // names resolved by a first positive claim
	Duplicates      uint64 // claims from a second GUID for a resolved name
	IgnoredGUID     uint64 // replies from an ignored server
	Negative        uint64 // found=false replies (never stop a search)
	BadProtocol     uint64 // replies for a protocol we did not search for
	Unusable        uint64 // replies naming no usable endpoint (UDP port 0)
	UnknownCID      uint64 // claimed CIDs of no current Channel
	Unmatched       uint64 // claimed CIDs whose reply echoes no sequence ID they were searched with
	Pokes           uint64 // accepted hurry-ups
	PokesIgnored    uint64 // hurry-ups refused (hold-off or fast revolution running)
	Reentered       uint64 // resolved names put back into search
	Swept           uint64 // abandoned Channels discarded
	// ChannelsRefused: names not searched through, MaxChannels reached.
	ChannelsRefused uint64
	// DatagramsLimited: datagrams not sent, over DatagramsPerSecond.
	DatagramsLimited uint64
	// ThirdParty: positive replies over TCP from a server (not a name
	// server) naming another endpoint than its own.
	ThirdParty uint64
	// ClaimsForgotten: claims forgotten, oldest first, beyond the bound
	// (searchring.DefaultMaxChannels pairs of endpoint and name).
	ClaimsForgotten uint64
}

// Stats returns a snapshot.
func (r *Ring) Stats() Stats {
	r.mu.Lock()
	s := Stats{Channels: len(r.byName), Searching: r.searching, Initial: r.nInitial, Dropped: len(r.dropped)}
	r.mu.Unlock()
	c := &r.ctr
	s.NamesSearched = c.namesSearched.Load()
	s.Datagrams = c.datagrams.Load()
	s.UpstreamSent = c.upstreamSent.Load()
	s.UpstreamSkipped = c.upstreamSkipped.Load()
	s.Replies = c.replies.Load()
	s.Resolved = c.resolved.Load()
	s.Duplicates = c.duplicates.Load()
	s.IgnoredGUID = c.ignoredGUID.Load()
	s.Negative = c.negative.Load()
	s.BadProtocol = c.badProtocol.Load()
	s.Unusable = c.unusable.Load()
	s.UnknownCID = c.unknownCID.Load()
	s.Unmatched = c.unmatched.Load()
	s.Pokes = c.pokes.Load()
	s.PokesIgnored = c.pokesIgnored.Load()
	s.Reentered = c.reentered.Load()
	s.Swept = c.swept.Load()
	s.ChannelsRefused = c.refused.Load()
	s.DatagramsLimited = c.limited.Load()
	s.ThirdParty = c.thirdParty.Load()
	s.ClaimsForgotten = c.claimsForgotten.Load()
	return s
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
