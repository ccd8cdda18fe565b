package udpsearch

import (
	"errors"
	"net/netip"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/ratelimit"
	"github.com/pvans-project/pvans/internal/relay"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/twin"
)

// origin is how a datagram reached the search port (docs/protocol.md,
// "Classifying a datagram").
type origin uint8

const (
	// originBroadcast: sent to a broadcast address of the arrival
	// interface, or anything that is neither unicast to us nor forwarded.
	originBroadcast origin = iota
	// originUnicast: sent to one of the host's own addresses (PVXS calls
	// it "Forwarding": only one socket sharing the port sees it, so it is
	// forwarded to the loopback group for the others, and answered here).
	originUnicast
	// originForwarded: arrived on loopback addressed to the group.
	originForwarded
	// originTagged: forwarded, carrying an accepted CMD_ORIGIN_TAG.
	originTagged
)

// datagram is one received datagram and where it arrived.
type datagram struct {
	b       []byte
	src     netip.AddrPort
	dst     netip.Addr // IP_PKTINFO header destination
	ifIndex int        // IP_PKTINFO arrival interface
}

// sender is what the handler sends through; sockets in the daemon, a
// recorder in tests.
type sender interface {
	// reply sends b to to, from the local address from through interface
	// ifIndex; an invalid from (and ifIndex 0) means no pinning.
	reply(b []byte, to netip.AddrPort, from netip.Addr, ifIndex int)
	// forward sends b to the loopback group.
	forward(b []byte)
}

var protoTCP = "tcp"

// handler is the per-datagram logic of the search port. It is used by one
// goroutine at a time: its scratch values are reused between datagrams.
type handler struct {
	o   *Options
	st  *counters
	ifs *atomic.Pointer[ifaceTable]
	out sender
	// pace holds replies to a client beyond its pace (nil: none).
	pace *pacing
	// reload re-reads the interface table (rate-limited by its owner)
	// when a datagram arrives on an unknown interface; may be nil.
	reload func() *ifaceTable

	allowed map[netip.Addr]bool // nil: answer from any local address

	// dests are the search destinations now (nil: Options.AddrList);
	// expected reports servers asked directly, at a port or (0) any (nil:
	// none). Client socket only: they decide which search replies were
	// solicited.
	dests    func() []netip.AddrPort
	expected func(a netip.Addr, port uint16) bool

	// pol is the policy in force (shared with the Server, which replaces
	// it on Apply); p is the one loaded for the datagram being handled,
	// so one datagram sees one policy throughout.
	pol *atomic.Pointer[policy]
	p   *policy

	// ownSrc is the forwarder socket's address: datagrams from it are
	// pvans's own forwards looped back (invalid: none recognised).
	ownSrc netip.AddrPort
	// ownClient are the ports of pvans's own client sockets (search-through
	// searches): a search from one of them on a local address is not told
	// to insight.
	ownClient [2]uint16
	// peers decides whether a unicast search is forwarded at all; nil:
	// always.
	peers *portPeers

	// learn: the datagram being handled arrived where hints are taken
	// from (learnable).
	learn bool

	search pva.Search
	resp   pva.SearchResponse
	beacon pva.Beacon
	batch  resolver.Batch
	buf    []byte
	cids   []uint32 // scratch of pacing.unheld
	fresh  []uint64 // scratch of admit
	// teller remembers answers for the restart fan-out (nil: the
	// Resolver does not).
	teller Teller

	// twin is the client's own TCP connection for the search being
	// answered (Options.Twins); candidate: none yet, but its host has one.
	twin      *twin.Conn
	candidate bool
}

func newHandler(o *Options, st *counters, ifs *atomic.Pointer[ifaceTable], out sender) *handler {
	h := &handler{o: o, st: st, ifs: ifs, out: out, buf: make([]byte, 0, 2048), pol: &atomic.Pointer[policy]{}}
	h.pol.Store(newPolicy(o.policy(), nil, o.Clock))
	h.teller, _ = o.Resolver.(Teller)
	if len(o.Interfaces) > 0 {
		h.allowed = map[netip.Addr]bool{}
		for _, a := range o.Interfaces {
			h.allowed[a.Unmap()] = true
		}
	}
	return h
}

// handle processes one datagram from the search port.
func (h *handler) handle(d *datagram) {
	h.p = h.pol.Load()
	h.st.datagrams.Add(1)
	if h.ownCopy(d) {
		return
	}
	if d.src.Addr().IsMulticast() {
		h.st.dropMulticastSource.Add(1)
		return
	}
	t, info := h.arrival(d)
	if info == nil {
		h.st.dropUnknownInterface.Add(1)
		return
	}

	o, from, pin := originBroadcast, info.first, d.ifIndex
	if d.dst.Is6() {
		// IPv6 has no forwarding (PVXS forwards IPv4 unicast only):
		// every IPv6 search is answered directly, from the address it
		// was sent to, or for a multicast search from an address of the
		// arrival interface.
		from = info.first6
		if _, ok := t.local[d.dst]; ok {
			from = d.dst
		}
	} else if info.Loopback && d.dst == ForwardGroup {
		o, from, pin = originForwarded, netip.Addr{}, 0
		h.noteForwarder()
	} else if a, ok := info.bcast[d.dst]; ok {
		from = a
	} else if owner, ok := t.local[d.dst]; ok && (owner == d.ifIndex || info.Loopback) {
		// A unicast to us: on its own interface, or from a local process
		// (those arrive on loopback whatever the address). A weak-host
		// arrival (an address of another interface) is answered directly
		// from the arrival interface, as PVXS does, so the reply leaves
		// where the client is. The answer leaves through the interface
		// owning the address, as it did when pvans answered the forwarded
		// copy.
		o, from, pin = originUnicast, d.dst, owner
	} else if ok && h.allowed != nil && h.allowed[d.dst] && !h.allowed[from] {
		// A weak-host arrival at a served address from an unserved leg:
		// a gateway host serving its IOC leg, reached by a client on the
		// other leg that names the served address (a pvAccessCPP client's
		// EPICS_PVA_ADDR_LIST). A PVXS server bound to that address gets
		// every unicast to it; answer from it, out of the arrival
		// interface where the client is.
		o, from = originUnicast, d.dst
	}

	hdr, payload, rest, err := pva.SplitMessage(d.b)
	if err != nil {
		h.st.dropMalformed.Add(1)
		return
	}
	if hdr.Control() || hdr.Segment() != 0 {
		h.st.dropControl.Add(1)
		return
	}
	switch hdr.Command {
	case pva.CmdSearch:
		h.onSearch(o, d, hdr, payload, d.b[:pva.HeaderSize+len(payload)], from, pin)
	case pva.CmdOriginTag:
		h.onOriginTag(o, d, t, hdr, payload, rest)
	case pva.CmdBeacon:
		h.noteBeacon(d, t)
		h.learn = h.learnable(d, t, info)
		h.onBeacon(d, hdr, payload)
	case pva.CmdSearchResponse:
		h.learn = h.learnable(d, t, info)
		h.onResponse(d.src, hdr, payload, false)
	default:
		h.st.dropCommand.Add(1)
	}
}

// arrival is the interface table and the interface d arrived on (nil when
// the table does not know it, even after a reload).
func (h *handler) arrival(d *datagram) (*ifaceTable, *ifaceInfo) {
	t := h.ifs.Load()
	var info *ifaceInfo
	if t != nil {
		info = t.byIndex[d.ifIndex]
	}
	if info == nil && h.reload != nil {
		if t = h.reload(); t != nil {
			info = t.byIndex[d.ifIndex]
		}
	}
	return t, info
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

// onOriginTag applies the forwarding safety rules (docs/protocol.md,
// "Forwarding safety rules") to a tagged datagram and hands the search
// behind the tag on.
func (h *handler) onOriginTag(o origin, d *datagram, t *ifaceTable, hdr pva.Header, payload, rest []byte) {
	if o != originForwarded {
		h.st.dropTagNotForwarded.Add(1)
		return
	}
	tag, err := pva.DecodeOriginTag(payload, hdr.BigEndian())
	if err != nil {
		h.st.dropMalformed.Add(1)
		return
	}
	h2, p2, _, err := pva.SplitMessage(rest)
	if err != nil {
		h.st.dropMalformed.Add(1)
		return
	}
	switch {
	case h2.Control() || h2.Segment() != 0:
		h.st.dropControl.Add(1)
		return
	case h2.Command == pva.CmdOriginTag:
		h.st.dropSecondTag.Add(1)
		return
	case h2.Command != pva.CmdSearch:
		h.st.dropTagNotSearch.Add(1)
		return
	}
	from, pin := netip.Addr{}, 0
	if !tag.IsAny() {
		a := tag.Addr()
		idx, ok := t.local[a]
		if !ok {
			h.st.dropTagForeign.Add(1)
			return
		}
		from, pin = a, idx
	}
	h.onSearch(originTagged, d, h2, p2, rest[:pva.HeaderSize+len(p2)], from, pin)
}

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
	dest := netip.AddrPortFrom(to, s.ReplyPort)
	if s.IsDiscovery() {
		if s.MustReply() {
			h.st.discoveryPings.Add(1)
			h.sendNegative(dest, from, pin)
		}
		return
	}
	answered := false
	h.pairing(o, d, dest, payload)
	if len(s.Names) > 0 && h.p.AnswerNames && h.o.Resolver != nil {
		if !s.HasProtocol(protoTCP) && !s.HasProtocol("tls") {
			h.st.dropNoTCP.Add(1)
		} else {
			h.st.searchNames.Add(uint64(len(s.Names)))
			h.o.Resolver.Lookup(s.Names, &h.batch)
			own := h.ownSearch(client)
			if ob := h.o.Insight; ob != nil && !own {
				found := 0
				for i := range h.batch.Groups {
					found += len(h.batch.Groups[i].CIDs)
				}
				ob.Searched(client.Addr(), false, payload, s.Names, h.batch.Missing, found)
			}
			tls := s.HasProtocol("tls")
			// Names nobody listed are searched through for a client that
			// reaches pvans only over UDP: one that sent its search to
			// pvans's host (unicast, or forwarded here from another
			// socket of the host). A broadcast reaches the servers
			// themselves, and searching through every name the network
			// broadcasts would only repeat it. Not for a paired client
			// (its own TCP connection waits for the names), nor for
			// pvans's own searches heard back.
			if w, ok := h.o.Resolver.(UDPWaiter); ok && o != originBroadcast && len(h.batch.Missing) > 0 && !own && h.twin == nil {
				w.WaitUDP(dest, s.Names, h.batch.Missing, tls)
			}
			for i := range h.batch.Groups {
				g := &h.batch.Groups[i]
				srv := &g.Server
				var viaTLS resolver.Endpoint
				if srv.TLSPort != 0 && tls {
					// Never downgrade a client that offers TLS (only
					// servers with a TLS endpoint pay for the check).
					viaTLS, _ = srv.For(true)
					srv = &viaTLS
				}
				if len(g.CIDs) == 0 || !s.HasProtocol(srv.Protocol) {
					continue
				}
				answered = true
				// A client searching again while its replies wait in the
				// pacer's queue is not answered twice for a name.
				cids := h.pace.unheld(dest, g.CIDs, &h.cids)
				if len(cids) == 0 {
					continue
				}
				addr, port := srv.Wire(dest.Addr(), h.p.AddressMap)
				h.buf = appendResponse(h.buf[:0], srv.GUID, s.Seq, addr, port, srv.Protocol, cids)
				h.st.claims.Add(uint64(len(cids)))
				if h.sendCIDs(dest, from, pin, cids) && h.teller != nil && !h.ownSearch(client) &&
					h.p.refl.Reserve(dest.Addr(), len(h.buf)) {
					// The restart fan-out may answer these CIDs again
					// (resolver, told.go): that copy is paid for now, from
					// the same reflection budget as this answer.
					h.teller.ToldUDP(resolver.UDPDest{To: dest, From: from, Pin: pin}, s.Names, &h.batch, i, cids, tls)
				}
			}
		}
	}
	if !answered && s.MustReply() {
		h.sendNegative(dest, from, pin)
	}
}

// pairing finds the client's own TCP name-server connection for this
// search (h.twin), or whether one may yet be found (h.candidate). Only a
// search that came straight from the socket its replies go to is
// compared (a PVXS client searches from the socket its replies come to):
// a forwarded copy's reply address, and any search's reply port, are the
// sender's word alone, and another process of the client's host could
// name the client's port.
func (h *handler) pairing(o origin, d *datagram, dest netip.AddrPort, payload []byte) {
	h.twin, h.candidate = nil, false
	tw := h.o.Twins
	if tw == nil || !h.p.AnswerOverTCP || (o != originUnicast && o != originBroadcast) || netip.AddrPortFrom(d.src.Addr().Unmap(), d.src.Port()) != dest {
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

func (h *handler) sendNegative(dest netip.AddrPort, from netip.Addr, pin int) {
	h.buf = appendResponse(h.buf[:0], h.o.GUID, h.search.Seq, pva.AnyIPv4, h.o.TCPPort, protoTCP, nil)
	h.send(dest, from, pin)
}

// send sends h.buf, a reply naming no channel.
func (h *handler) send(dest netip.AddrPort, from netip.Addr, pin int) {
	h.sendCIDs(dest, from, pin, nil)
}

// sendCIDs sends h.buf, a reply naming the channels cids (their number
// is its weight for the client's pace). A search paired with the client's
// TCP connection is answered over it, unpaced (TCP paces itself) and not
// charged to the reflection bound (the host opened that connection); the
// socket takes what the connection's queue has no room for. It reports
// whether the reply went (or waits to go) to dest over UDP.
func (h *handler) sendCIDs(dest netip.AddrPort, from netip.Addr, pin int, cids []uint32) bool {
	if len(cids) > 0 && h.twin != nil && h.twin.Send(h.buf) {
		h.st.repliesOverTCP.Add(1)
		return false
	}
	if !h.p.refl.Reply(dest.Addr(), len(h.buf)) {
		h.st.reflectionCapped.Add(1)
		return false
	}
	ok, stashed := h.pace.send(h.out, h.buf, dest, from, pin, cids, h.candidate && len(cids) > 0)
	if ok {
		h.st.responses.Add(1)
	}
	if stashed {
		// The pair may have come since pairing looked, its divert run
		// before this reply was stashed.
		if c := h.o.Twins.Paired(dest); c != nil {
			h.pace.divert(dest, c.Send)
		}
	}
	return ok && !stashed
}

// appendResponse appends a big-endian server-direction CMD_SEARCH_RESPONSE
// (as PVXS sends over UDP) without building a pva.SearchResponse, so the
// protocol string is not copied to a []byte per answer.
func appendResponse(dst []byte, guid pva.GUID, seq uint32, addr pva.Address, port uint16, proto string, cids []uint32) []byte {
	size := 12 + 4 + 16 + 2 + pva.SizeLen(len(proto)) + len(proto) + 1 + 2 + 4*len(cids)
	dst = pva.AppendHeader(dst, pva.Header{Flags: pva.FlagBigEndian | pva.FlagServer, Command: pva.CmdSearchResponse, Size: uint32(size)})
	w := pva.Writer{B: dst, BE: true}
	w.GUID(guid)
	w.U32(seq)
	w.Address(addr)
	w.U16(port)
	w.String(proto)
	if len(cids) > 0 {
		w.U8(1)
	} else {
		w.U8(0)
	}
	w.U16(uint16(len(cids)))
	for _, c := range cids {
		w.U32(c)
	}
	return w.B
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

// hint decides whether a datagram that names a server (a beacon or a
// search response) is believed as a hint, and the endpoint it names:
// "any" means the sender's own address, as PVXS reads it; any other
// address must be the sender's, unless the sender is a trusted relay; the
// server allow list must admit both; only "tcp" and "tls" servers are
// tracked. Each refusal is counted by reason.
func (h *handler) hint(a pva.Address, port uint16, proto string, src netip.AddrPort) (netip.AddrPort, bool) {
	if proto != protoTCP && proto != "tls" {
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

// allowSighting spends a believed sighting's beacon budget
// (rate_limit.beacons_per_second): its sender's, or for a trusted relay
// speaking for another host, the named server's relayed budget, so one
// relay announcing a subnet of IOCs gives each of them the budget a
// directly heard IOC has, and a datagram forged from the relay's address
// cannot spend an IOC's own. The relay's sightings are bounded on its
// side (relay.max_per_second) and by the tracker's limit here.
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

// handleClient processes one datagram from the client socket: only
// search responses are expected there.
func (h *handler) handleClient(d *datagram) {
	h.p = h.pol.Load()
	hdr, payload, _, err := pva.SplitMessage(d.b)
	switch {
	case err != nil:
		h.st.dropMalformed.Add(1)
	case hdr.Control() || hdr.Segment() != 0:
		h.st.dropControl.Add(1)
	case hdr.Command != pva.CmdSearchResponse:
		h.st.dropCommand.Add(1)
	default:
		h.learn = true
		if h.p.learn != nil {
			t, info := h.arrival(d)
			h.learn = h.learnable(d, t, info)
		}
		h.onResponse(d.src, hdr, payload, true)
	}
}
