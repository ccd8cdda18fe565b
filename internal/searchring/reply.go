package searchring

import (
	"net/netip"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/pva"
)

type event struct {
	name        string
	guid, first pva.GUID
	ep          netip.AddrPort
	duplicate   bool
}

// OnReply processes one CMD_SEARCH_RESPONSE (spec §3.5), from a UDP
// datagram or an upstream TCP connection (from is then the connection's
// peer). Unlike a PVXS client, which correlates by CID alone, the ring
// takes a claim only when the reply echoes the sequence ID of one of the
// last searches that carried that CID (CIDs and the first sequence ID are
// random): a forged reply must have seen the search. That the reply came
// from where the search went is the caller's check (udpsearch drops UDP
// replies from hosts it did not search; TCP replies come on the
// connection the search went out on).
//
// The endpoint is the reply's address, or from's IP when that is a
// wildcard; over TCP a zero port means from's port. A UDP reply with port 0
// names no usable endpoint and is ignored. Replies from ignored GUIDs,
// negative replies (which never suppress or delay searching) and protocols
// not searched for are discarded. The first positive claim resolves the
// Channel: it leaves the ring and Resolved is called. A later claim from a
// different GUID is reported to Duplicate and counted, never acted on.
func (r *Ring) OnReply(from netip.AddrPort, overTCP bool, m *pva.SearchResponse) {
	r.ctr.replies.Add(1)
	ip := from.Addr().Unmap()
	if !m.Addr.IsAny() {
		ip = m.Addr.Addr()
	}
	port := m.Port
	if port == 0 && overTCP {
		port = from.Port()
	}
	if _, bad := r.ignore[m.GUID]; bad {
		r.ctr.ignoredGUID.Add(1)
		return
	}
	if !m.Found {
		r.ctr.negative.Add(1)
		return
	}
	if !r.acceptProtocol(m.Protocol) {
		r.ctr.badProtocol.Add(1)
		return
	}
	if port == 0 || !ip.IsValid() {
		r.ctr.unusable.Add(1)
		return
	}
	ep := netip.AddrPortFrom(ip, port)

	var events []event
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	for _, cid := range m.CIDs {
		ch := r.byCID[cid]
		switch {
		case ch == nil:
			r.ctr.unknownCID.Add(1)
		case !ch.searchedWith(m.Seq):
			r.ctr.unmatched.Add(1)
		case ch.state == stSearching:
			ch.state = stResolved
			ch.guid = m.GUID
			ch.ep = ep
			ch.attempts = 0
			r.searching--
			r.leaveRingLocked(ch)
			r.ctr.resolved.Add(1)
			events = append(events, event{name: ch.name, guid: m.GUID, ep: ep})
		case ch.guid != m.GUID:
			r.ctr.duplicates.Add(1)
			events = append(events, event{name: ch.name, guid: m.GUID, first: ch.guid, duplicate: true})
		}
	}
	r.mu.Unlock()

	for _, e := range events {
		if e.duplicate {
			r.log.Warn("duplicate PV name", zap.String("name", e.name),
				zap.Stringer("first", e.first), zap.Stringer("second", e.guid), zap.Stringer("from", from))
			if r.duplicate != nil {
				r.duplicate(e.name, e.first, e.guid)
			}
			continue
		}
		if r.resolved != nil {
			r.resolved(e.name, e.guid, e.ep)
		}
	}
}

func (r *Ring) acceptProtocol(p []byte) bool {
	switch string(p) {
	case "tcp":
		return r.protoTCP
	case "tls":
		return r.protoTLS
	}
	return false
}

// Reenter puts a resolved name back into search because the claim proved
// broken (spec §3.6): at the cursor (searched at the next tick) when the
// channel was lost while active, cursor+10 (~10 s) when connecting failed,
// cursor−1 (~30 s, searched last) when the server refused to create it.
// The attempt count restarts, so backoff starts from the beginning. It
// reports false when name is not a resolved Channel (unknown, already
// searching, or swept; Want a swept name instead).
func (r *Ring) Reenter(name string, why Reason) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := r.byName[name]
	if r.closed || ch == nil || ch.state != stResolved {
		return false
	}
	r.reenterLocked(ch, why)
	return true
}

// ReenterServer re-enters every name the ring resolved to guid (see
// Reenter): the daemon calls it when that server proves dead or refuses
// what it claimed, so the clients it was pushed to find the name again
// when they come back. Only Channels still remembered (not yet swept) are
// affected; it returns how many.
func (r *Ring) ReenterServer(guid pva.GUID, why Reason) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0
	}
	n := 0
	for _, ch := range r.byName {
		if ch.state == stResolved && ch.guid == guid {
			r.reenterLocked(ch, why)
			n++
		}
	}
	return n
}

func (r *Ring) reenterLocked(ch *channel, why Reason) {
	ch.state = stSearching
	ch.attempts = 0
	ch.guid = pva.GUID{}
	ch.ep = netip.AddrPort{}
	ch.epoch++
	b := (r.cursor + why.offset()) % Buckets
	r.buckets[b] = append(r.buckets[b], entry{ch, ch.epoch})
	r.live[b]++
	ch.bucket = b
	r.searching++
	r.ctr.reentered.Add(1)
	r.log.Debug("search re-entered", zap.String("name", ch.name), zap.Stringer("reason", why))
}

// Searching lists the names being searched, with their CIDs, so a caller
// can ask one server about all of them directly, and the sequence ID to
// ask with: a reply is matched through OnReply like any other (sequence
// ID and CID), so the caller must send exactly that one. The names are
// copies.
func (r *Ring) Searching() (seq uint32, names []pva.SearchName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq = r.nextSeq
	r.nextSeq++
	out := make([]pva.SearchName, 0, r.searching)
	for _, ch := range r.byName {
		if ch.state == stSearching {
			ch.sentWith(seq)
			out = append(out, pva.SearchName{CID: ch.cid, Name: []byte(ch.name)})
		}
	}
	return seq, out
}
