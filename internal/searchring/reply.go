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
	tls         bool // a WantTLS Channel
	overTLS     bool // the reply's protocol was "tls"
}

// Via is how a search response reached the ring; it decides whom the
// response may name.
type Via uint8

const (
	// ViaUDP: a datagram. udpsearch has already settled the endpoint by
	// the UDP hint rule (the sender's own address, unless it is a trusted
	// relay).
	ViaUDP Via = iota
	// ViaNameServer: over TCP from an upstream name server pvans was
	// configured to use, or from a trusted relay: it may name any endpoint.
	ViaNameServer
	// ViaServer: over TCP from any other server (one asked directly): it
	// may name only itself, its address "any" or the connection's peer's
	// and its port 0 or the peer's.
	ViaServer
)

// OnReply processes one CMD_SEARCH_RESPONSE (docs/protocol.md, "Search
// replies at the client"), from a UDP datagram or a TCP connection (from is
// then the connection's peer; via says which). Unlike a PVXS client, which
// correlates by CID alone, the ring takes a claim only when the reply
// echoes the sequence ID of one of the last searches that carried that CID
// (CIDs and the first sequence ID are random): a forged reply must have
// seen the search. That the reply came from where the search went is the
// caller's check (udpsearch drops UDP replies from hosts it did not search;
// TCP replies come on the connection the search went out on).
//
// The endpoint is the reply's address, or from's IP when that is a
// wildcard; over TCP a zero port means from's port. A reply over TCP from
// a server that is not a name server (ViaServer) naming another endpoint
// than from is dropped (ThirdParty): otherwise one unlistable server could
// point clients, and pvans's probes, at any host. A UDP reply with port 0
// names no usable endpoint and is ignored. Replies from ignored GUIDs,
// negative replies (which never suppress or delay searching) and protocols
// not searched for are discarded: a "tls" reply answers only Channels of
// WantTLS (whose TLSProtocols accept "tcp" too, as a PVXS client with a
// keychain does), never Want's unless Options.Protocols lists "tls"; a
// "tcp" reply answers Want's Channels only if Options.Protocols lists
// "tcp". The first positive claim resolves the
// Channel: it leaves the ring, the endpoint is remembered as having
// claimed the name (SearchingAt) and Resolved is called. A later claim
// from a different GUID is reported to Duplicate and counted, never acted
// on.
func (r *Ring) OnReply(from netip.AddrPort, via Via, m *pva.SearchResponse) {
	r.ctr.replies.Add(1)
	overTCP := via != ViaUDP
	ip := from.Addr().Unmap()
	if !m.Addr.IsAny() {
		ip = m.Addr.Addr().Unmap()
	}
	port := m.Port
	if port == 0 && overTCP {
		port = from.Port()
	}
	if via == ViaServer && m.Found && (ip != from.Addr().Unmap() || port != from.Port()) {
		r.ctr.thirdParty.Add(1)
		if ce := r.log.Check(zap.DebugLevel, "search reply over TCP names another endpoint than its server's: dropped"); ce != nil {
			ce.Write(zap.Stringer("from", from), zap.Stringer("named", netip.AddrPortFrom(ip, port)))
		}
		return
	}
	if _, bad := r.ignore[m.GUID]; bad {
		r.ctr.ignoredGUID.Add(1)
		return
	}
	if !m.Found {
		r.ctr.negative.Add(1)
		return
	}
	overTLS := string(m.Protocol) == "tls"
	if !overTLS && string(m.Protocol) != "tcp" {
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
			r.ctr.unmatched.Add(1)
		case !ch.tls && !r.acceptProtocol(overTLS):
			r.ctr.badProtocol.Add(1)
		case !ch.searchedWith(m.Seq):
			r.ctr.unmatched.Add(1)
		case ch.state == stSearching:
			ch.state = stResolved
			ch.guid = m.GUID
			ch.ep = ep
			ch.attempts = 0
			r.searching--
			r.leaveRingLocked(ch)
			r.claims.add(ep, ch.name, r.maxClaims(), r.forgotClaim)
			r.ctr.resolved.Add(1)
			events = append(events, event{name: ch.name, guid: m.GUID, ep: ep, tls: ch.tls, overTLS: overTLS})
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
		switch {
		case e.tls && r.resolvedT != nil:
			r.resolvedT(e.name, e.guid, e.ep, e.overTLS)
		case !e.tls && r.resolved != nil:
			r.resolved(e.name, e.guid, e.ep)
		}
	}
}

// acceptProtocol is whether Want's Channels take a "tls" (overTLS) or
// "tcp" reply.
func (r *Ring) acceptProtocol(overTLS bool) bool {
	if overTLS {
		return r.protoTLS
	}
	return r.protoTCP
}

// Reenter puts a resolved name back into search because the claim proved
// broken (docs/protocol.md, "Re-entry into search"): at the cursor
// (searched at the next tick) when the channel was lost while active,
// cursor+10 (~10 s) when connecting failed, cursor−1 (~30 s, searched last)
// when the server refused to create it. The attempt count restarts, so
// backoff starts from the beginning. It reports false when name is not a
// resolved Channel (unknown, already searching, or swept; Want a swept name
// instead). Both the plain and the TLS Channel of name re-enter.
func (r *Ring) Reenter(name string, why Reason) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	ok := false
	for _, k := range [2]chanKey{{name, false}, {name, true}} {
		if ch := r.byName[k]; ch != nil && ch.state == stResolved {
			r.reenterLocked(ch, why)
			ok = true
		}
	}
	return ok
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
