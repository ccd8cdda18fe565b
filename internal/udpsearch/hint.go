package udpsearch

import (
	"errors"
	"net/netip"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/relay"
)

// Hints: beacons, discovery answers and search responses name servers.
// None is believed as it stands (docs/SECURITY.md, "Trust: a UDP
// datagram is a hint; only TCP proves"): each passes the checks here
// before it reaches the tracker or the search-through client.

// onHint takes a beacon or a search response that reached the search
// port: learned from only where the arrival interface allows (learnable).
func (h *handler) onHint(d *datagram, t *ifaceTable, info *ifaceInfo, hdr pva.Header, payload []byte) {
	h.learn = h.learnable(d, t, info)
	if hdr.Command == pva.CmdBeacon {
		h.noteBeacon(d, t)
		h.onBeacon(d, hdr, payload)
		return
	}
	h.onResponse(d.src, hdr, payload, false)
}

func (h *handler) onBeacon(d *datagram, hdr pva.Header, payload []byte) {
	h.st.beacons.Add(1)
	b := &h.beacon
	if err := b.Decode(payload, hdr.BigEndian()); err != nil {
		if errors.Is(err, pva.ErrProtocolTooLong) {
			h.st.hintProtocol.Add(1)
			return
		}
		h.st.dropMalformed.Add(1)
		return
	}
	if h.o.Beacons == nil || b.GUID == h.o.GUID {
		return
	}
	if !h.learn {
		h.foreign(d.src)
		return
	}
	ep, ok := h.hint(b.Addr, b.Port, b.Protocol, d.src)
	if !ok {
		return
	}
	if !h.allowSighting(d.src, ep) {
		h.st.hintRate.Add(1)
		return
	}
	h.o.Beacons.Observe(beacon.Observation{
		GUID: b.GUID, Endpoint: ep, Protocol: b.Protocol,
		Version: hdr.Version, ChangeCount: b.ChangeCount, From: d.src, Via: beacon.ViaBeacon,
	})
}

// onResponse handles a CMD_SEARCH_RESPONSE on either socket: discovery
// replies go to the tracker, positive ones to the search-through client;
// both only as hints (see hint). A positive reply counts only on the client
// socket (the one pvans searches from) and from a host pvans searched.
func (h *handler) onResponse(src netip.AddrPort, hdr pva.Header, payload []byte, client bool) {
	h.st.searchReplies.Add(1)
	m := &h.resp
	if err := m.Decode(payload, hdr.BigEndian()); err != nil {
		h.st.dropMalformed.Add(1)
		return
	}
	if m.GUID == h.o.GUID {
		return // our own answer, heard back
	}
	if len(m.Protocol) > pva.MaxProtocolLen {
		h.st.hintProtocol.Add(1)
		return
	}
	// Answers to what pvans asked a known server over TCP (a ping, a
	// direct ask) come over UDP from wherever that server is; everything
	// else is learned only from the interfaces pvans serves.
	if !m.Found && len(m.CIDs) == 0 {
		if client && h.o.OnPingAnswer != nil && h.o.OnPingAnswer(src, m) {
			return // the answer to a ping sent over TCP: the prober's
		}
		if !h.learn {
			h.foreign(src)
			return
		}
		h.st.discoveryPongs.Add(1)
		if h.o.Beacons == nil {
			return
		}
		if ep, ok := h.hint(m.Addr, m.Port, pva.KnownProtocol(m.Protocol), src); ok {
			if !h.allowSighting(src, ep) {
				h.st.hintRate.Add(1)
				return
			}
			h.o.Beacons.Observe(beacon.Observation{
				GUID: m.GUID, Endpoint: ep, Protocol: pva.KnownProtocol(m.Protocol),
				Version: hdr.Version, From: src, Via: beacon.ViaDiscovery,
			})
		}
		return
	}
	if h.o.OnSearchResponse == nil || !m.Found {
		return
	}
	// A host pvans did not search may answer only when pvans asked one of
	// its servers directly (Server.Expect), and then only for that server.
	if !client {
		h.st.hintUnsolicited.Add(1)
		return
	}
	searched := h.searched(src.Addr())
	asked := h.expected != nil && h.expected(src.Addr().Unmap(), 0)
	if !h.learn && !asked {
		h.foreign(src)
		return
	}
	if !searched && !asked {
		h.st.hintUnsolicited.Add(1)
		return
	}
	ep, ok := h.hint(m.Addr, m.Port, pva.KnownProtocol(m.Protocol), src)
	if !ok {
		return
	}
	// Off the served networks only the server asked may answer, naming
	// itself.
	if (!searched || !h.learn) && !h.expected(src.Addr().Unmap(), ep.Port()) {
		h.st.hintUnsolicited.Add(1)
		return
	}
	// The endpoint is settled: hand it on as the address, so the receiver
	// never has to substitute the sender again.
	m.Addr = pva.AddressFrom(ep.Addr())
	h.o.OnSearchResponse(src, m)
}

// hint decides whether a datagram that names a server (a beacon or a
// search response) is believed as a hint, and the endpoint it names:
// "any" means the sender's own address, as PVXS reads it; any other
// address must be the sender's, unless the sender is a trusted relay; the
// server allow list must admit both; only "tcp" and "tls" servers are
// tracked. Each refusal is counted by reason.
func (h *handler) hint(a pva.Address, port uint16, proto string, src netip.AddrPort) (netip.AddrPort, bool) {
	if proto != "tcp" && proto != "tls" {
		h.st.hintProtocol.Add(1)
		return netip.AddrPort{}, false
	}
	sender := src.Addr().Unmap()
	ip := sender
	if !a.IsAny() {
		ip = a.Addr().Unmap()
		// A relay speaks for other hosts, never for pvans's own loopback
		// services or for an address no server has: its source can be
		// forged by anyone who can send as the relay.
		if ip != sender && (!h.trustedRelay(sender) || !relayable(h.ifs.Load(), ip)) {
			h.st.hintAddress.Add(1)
			if ce := h.o.Logger.Check(zap.DebugLevel, "hint names another address than its sender's: dropped"); ce != nil {
				ce.Write(zap.Stringer("sender", src), zap.Stringer("named", ip))
			}
			return netip.AddrPort{}, false
		}
	}
	if allow := h.p.ServerAllowed; allow != nil && (!allow(sender) || !allow(ip)) {
		h.st.hintNotAllowed.Add(1)
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip, port), true
}

// learnable reports whether hints in d are taken (Policy.LearnFrom): by
// the interface d arrived on, or, for a local process's datagram (on
// loopback), by the interface owning the address it was sent to. The
// sender's address plays no part: it can be forged.
func (h *handler) learnable(d *datagram, t *ifaceTable, info *ifaceInfo) bool {
	p := h.p
	if p.learn == nil {
		return true
	}
	if info == nil {
		return false
	}
	if info.Loopback {
		if p.learnLoopback || p.learn[d.dst] {
			return true
		}
		owner, ok := t.local[d.dst]
		if !ok {
			return false
		}
		if info = t.byIndex[owner]; info == nil || info.Loopback {
			return false
		}
	}
	for _, a := range info.Prefixes {
		if p.learn[a.Addr()] {
			return true
		}
	}
	return false
}

// foreign counts a hint dropped for its arrival interface.
func (h *handler) foreign(src netip.AddrPort) {
	h.st.hintInterface.Add(1)
	if ce := h.o.Logger.Check(zap.DebugLevel, "hint arrived on an interface pvans does not learn from: dropped"); ce != nil {
		ce.Write(zap.Stringer("sender", src))
	}
}

// allowSighting spends a believed sighting's beacon budget
// (rate_limit.beacons_per_second): its sender's, or for a trusted relay
// speaking for another host, the named server's relayed budget, so one
// relay announcing a subnet of IOCs gives each of them the budget a
// directly heard IOC has, and a datagram forged from the relay's address
// cannot spend an IOC's own. The relay's sightings are bounded on its
// side (relay.DefaultPerSecond) and by the tracker's limit here.
func (h *handler) allowSighting(src, named netip.AddrPort) bool {
	if a := named.Addr(); a != src.Addr().Unmap() {
		return h.p.relayed.Allow(a)
	}
	return h.p.beacons.Allow(src.Addr())
}

func (h *handler) trustedRelay(a netip.Addr) bool {
	for _, p := range h.p.TrustedRelays {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// searched reports whether pvans's searches reach a: it is a search
// destination, or on the network of a directed broadcast destination, or
// a destination is multicast or the limited broadcast.
func (h *handler) searched(a netip.Addr) bool {
	a = a.Unmap()
	var dests []netip.AddrPort
	if h.dests != nil {
		dests = h.dests()
	} else {
		for _, d := range h.o.AddrList {
			dests = append(dests, d.Addr)
		}
	}
	t := h.ifs.Load()
	for _, d := range dests {
		da := d.Addr().Unmap()
		switch {
		case da == a, da.IsMulticast(), da == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
			return true
		case t != nil && t.bcast[da]:
			for _, info := range t.byIndex {
				for _, p := range info.Prefixes {
					if b, ok := directedBroadcast(p); ok && b == da && p.Masked().Contains(a) {
						return true
					}
				}
			}
		}
	}
	return false
}

// relayable reports whether a relay may name a: a unicast address of
// another host. Not what no relay may name (relay.Relayable: loopback,
// multicast, limited broadcast, link-local, unspecified), and not an
// address of this host or a directed broadcast of its networks, which
// would reach every service bound to the wildcard, as loopback would. t
// is the interface table (nil: not read yet).
func relayable(t *ifaceTable, a netip.Addr) bool {
	a = a.Unmap()
	if !relay.Relayable(a) {
		return false
	}
	if t == nil {
		return true
	}
	_, local := t.local[a]
	return !local && !t.bcast[a]
}
