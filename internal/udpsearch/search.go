package udpsearch

import (
	"net/netip"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/answer"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/ratelimit"
	"github.com/pvans-project/pvans/internal/resolver"
)

// replyFlags are the header flags of every answer sent over UDP: the
// server direction, big endian, as PVXS sends.
const replyFlags = pva.FlagBigEndian | pva.FlagServer

// onSearch takes a search from the datagram d that reached the port as o,
// through the access rules, the budgets and the forward, to its answer
// from the local address from through interface pin. msg is the search
// message, payload its body.
func (h *handler) onSearch(o origin, d *datagram, hdr pva.Header, payload, msg []byte, from netip.Addr, pin int) {
	h.st.searches.Add(1)
	s := &h.search
	if err := s.Decode(payload, hdr.BigEndian()); err != nil {
		h.st.dropMalformed.Add(1)
		return
	}
	var to netip.Addr
	if s.ReplyAddr.IsAny() {
		if o == originForwarded || o == originTagged {
			// The forwarder lost the client's address: nobody can answer.
			h.st.dropForwardedZero.Add(1)
			return
		}
		to = d.src.Addr()
	} else {
		to = s.ReplyAddr.Addr().Unmap()
	}
	// A socket answers only its own family: an IPv6 reply address in a
	// search that came over IPv4 (or the reverse) cannot be reached from
	// here.
	if to.Is4() != d.src.Addr().Unmap().Is4() || !h.replyable(to, s.ReplyPort) {
		h.st.dropReplyAddr.Add(1)
		return
	}
	client := d.src
	if o == originForwarded || o == originTagged {
		client = netip.AddrPortFrom(to, s.ReplyPort) // the datagram source is the forwarder
	}
	// The ignore list, the client access list and the rate limit silence a
	// client on the whole host: they come before the forward, or the other
	// servers sharing the port would answer it.
	if h.ignored(client) {
		h.st.dropIgnored.Add(1)
		return
	}
	if allow := h.p.ClientAllowed; allow != nil && (!allow(client.Addr()) || (to != client.Addr() && !allow(to))) {
		h.st.dropDenied.Add(1)
		if ce := h.o.Logger.Check(zap.DebugLevel, "UDP search refused by the client access list"); ce != nil {
			ce.Write(zap.Stringer("client", client), zap.Stringer("reply_to", to))
		}
		return
	}
	// Credited to where the replies go, whoever sent it: a spoofed source
	// or reply address can then get at most ReflectionRatio × its own
	// bytes sent to its victim.
	h.p.refl.Received(to, len(msg))
	if !h.admit(client.Addr(), s.Names) {
		h.st.dropRateLimited.Add(1)
		return
	}
	// Only one of the sockets sharing the port got a unicast: let the
	// others see it through the group, then answer it here, once. Our own
	// copy from the group is dropped on arrival (ownCopy).
	if o == originUnicast && !h.forward(d, msg, to) {
		return
	}
	if h.allowed != nil && from.IsValid() && !h.allowed[from] {
		h.st.dropNotOurInterface.Add(1)
		return
	}
	if m := h.p.MaxNamesPerSearch; m > 0 && len(s.Names) > m {
		h.st.namesDropped.Add(uint64(len(s.Names) - m))
		s.Names = s.Names[:m]
	}
	if s.IsDiscovery() && h.o.OnDiscoveryPing != nil && (o == originUnicast || o == originBroadcast) {
		h.o.OnDiscoveryPing(d.src)
	}
	if h.p.Silent {
		return
	}
	h.answer(o, client, netip.AddrPortFrom(to, s.ReplyPort), from, pin, payload)
}

// answer answers the search decoded in h.search from client, to its reply
// socket dest, as package answer decides: what is claimed goes out one
// reply per server, at the client's pace; the names nobody claims wait
// for a search through; the negative answer goes when owed.
func (h *handler) answer(o origin, client, dest netip.AddrPort, from netip.Addr, pin int, payload []byte) {
	s := &h.search
	h.twin, h.candidate = nil, false
	if h.o.Twins != nil && !s.IsDiscovery() {
		h.pairing(o, client, dest, payload)
	}
	own := h.ownSearch(client)
	req := answer.Request{Search: s, Payload: payload, Client: client.Addr(), To: dest.Addr(), Map: h.p.AddressMap,
		Broadcast: o == originBroadcast, Own: own, Paired: h.twin != nil}
	if h.p.AnswerNames {
		req.Resolver = h.o.Resolver
	}
	rep := h.rules.Answer(&req, &h.batch, h.claims[:0])
	h.claims = rep.Claims
	if rep.Looked > 0 {
		h.st.searchNames.Add(uint64(rep.Looked))
	}
	if rep.Wait {
		if w, ok := h.o.Resolver.(UDPWaiter); ok {
			w.WaitUDP(dest, s.Names, h.batch.Missing, rep.Offer)
		}
	}
	for i := range rep.Claims {
		c := &rep.Claims[i]
		// A client searching again while its replies wait in the pacer's
		// queue is not answered twice for a name.
		if c.CIDs = h.pace.unheld(dest, c.CIDs, &h.cids); len(c.CIDs) == 0 {
			continue
		}
		h.buf = answer.Append(h.buf[:0], replyFlags, s.Seq, c)
		h.st.claims.Add(uint64(len(c.CIDs)))
		if h.sendCIDs(dest, from, pin, c.CIDs) && h.teller != nil && !own &&
			h.p.refl.Reserve(dest.Addr(), len(h.buf)) {
			// The restart fan-out may answer these CIDs again
			// (resolver, told.go): that copy is paid for now, from the
			// same reflection budget as this answer.
			h.teller.ToldUDP(resolver.UDPDest{To: dest, From: from, Pin: pin}, s.Names, &h.batch, c.Group, c.CIDs, rep.Offer)
		}
	}
	if rep.Negative {
		if s.IsDiscovery() {
			h.st.discoveryPings.Add(1)
		}
		neg := answer.Negative(h.o.GUID, h.o.TCPPort)
		h.buf = answer.Append(h.buf[:0], replyFlags, s.Seq, &neg)
		h.sendCIDs(dest, from, pin, nil)
	}
}

// pairing finds the client's own TCP name-server connection for this
// search (h.twin), or whether one may yet be found (h.candidate). Only a
// search that came straight from the socket its replies go to is
// compared (a PVXS client searches from the socket its replies come to):
// a forwarded copy's reply address, and any search's reply port, are the
// sender's word alone, and another process of the client's host could
// name the client's port (client is the datagram's source for a unicast
// or broadcast search). Called only when Options.Twins is set: pairing is
// optional, and costs the search path a nil check when off.
func (h *handler) pairing(o origin, client, dest netip.AddrPort, payload []byte) {
	tw := h.o.Twins
	if !h.p.AnswerOverTCP || (o != originUnicast && o != originBroadcast) || netip.AddrPortFrom(client.Addr().Unmap(), client.Port()) != dest {
		return
	}
	// No TCP name-server connection open: nothing can pair (UDPSearch
	// would say so), and the search is not hashed for nothing.
	if !tw.Active() {
		return
	}
	if fp, ok := tw.Fingerprint(payload); ok {
		h.twin, h.candidate = tw.UDPSearch(dest, fp)
	}
}

// admit charges a search to its client's budgets, reporting false when
// they cannot pay: one datagram, and a name for each name looked up. A
// busy client (ratelimit.Limiter.PayIfIdle) pays instead for the share of
// its names it did not search within ratelimit.RepeatWindow, and a
// 64th for the others (docs/SECURITY.md, "Repeated searches").
func (h *handler) admit(client netip.Addr, names []pva.SearchName) bool {
	n := len(names)
	if m := h.p.MaxNamesPerSearch; m > 0 {
		n = min(n, m)
	}
	if n == 0 {
		return h.p.limit.Allow(client)
	}
	paid := h.p.limit.PayIfIdle(client, 1)
	if paid && h.p.names.PayIfIdle(client, n) {
		return true
	}
	rep, fresh := h.p.repeats.Price(client, n, func(i int) []byte { return names[i].Name }, h.fresh)
	h.fresh = fresh
	units := (n-rep)*ratelimit.RepeatShare + rep
	if (!paid && !h.p.limit.AllowFrac(client, units, n*ratelimit.RepeatShare)) ||
		!h.p.names.AllowFrac(client, units, ratelimit.RepeatShare) {
		return false
	}
	h.p.repeats.Remember(client, fresh)
	return true
}

// ownSearch reports whether a search came from one of pvans's own client
// sockets: one of their ports on a loopback or local address.
func (h *handler) ownSearch(c netip.AddrPort) bool {
	p := c.Port()
	if p == 0 || (p != h.ownClient[0] && p != h.ownClient[1]) {
		return false
	}
	if a := c.Addr().Unmap(); a.IsLoopback() {
		return true
	} else if t := h.ifs.Load(); t != nil {
		_, local := t.local[a]
		return local
	}
	return false
}

// replyable refuses reply destinations that would make pvans a reflector
// towards many hosts, or that cannot work: port 0, unspecified,
// multicast, limited or directed broadcast, IPv4-mapped IPv6.
func (h *handler) replyable(to netip.Addr, port uint16) bool {
	if port == 0 || !to.IsValid() || to.Is4In6() || to.IsUnspecified() || to.IsMulticast() {
		return false
	}
	if to == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return false
	}
	if t := h.ifs.Load(); t != nil && t.bcast[to] {
		return false
	}
	return true
}

func (h *handler) ignored(src netip.AddrPort) bool {
	for _, ig := range h.p.IgnoreAddrs {
		if ig.Addr().Unmap() == src.Addr() && (ig.Port() == 0 || ig.Port() == src.Port()) {
			return true
		}
	}
	return false
}
