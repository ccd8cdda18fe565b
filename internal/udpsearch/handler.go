package udpsearch

import (
	"net/netip"
	"sync/atomic"

	"github.com/pvans-project/pvans/internal/answer"
	"github.com/pvans-project/pvans/internal/pva"
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

	// rules decide what an answer says (package answer); claims is their
	// scratch.
	rules  answer.Rules
	claims []answer.Claim

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
	h.pol.Store(newPolicy(o.policy(), nil, o.Clock, &st.repeatsEvicted))
	h.rules = answer.Rules{Insight: o.Insight, Counters: st.answer()}
	h.teller, _ = o.Resolver.(Teller)
	if len(o.Interfaces) > 0 {
		h.allowed = map[netip.Addr]bool{}
		for _, a := range o.Interfaces {
			h.allowed[a.Unmap()] = true
		}
	}
	return h
}

// handle processes one datagram from the search port: where it came from
// and how (classify), then by command to the file of its concern: a
// search (search.go), an origin tag (forward.go), a beacon or a search
// response (hint.go).
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

	o, from, pin := h.classify(d, t, info)
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
	case pva.CmdBeacon, pva.CmdSearchResponse:
		h.onHint(d, t, info, hdr, payload)
	default:
		h.st.dropCommand.Add(1)
	}
}

// classify decides how d reached the port (docs/protocol.md,
// "Classifying a datagram"), and the local address from and interface pin
// an answer to it leaves from (invalid, 0: not pinned).
func (h *handler) classify(d *datagram, t *ifaceTable, info *ifaceInfo) (o origin, from netip.Addr, pin int) {
	o, from, pin = originBroadcast, info.first, d.ifIndex
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
	return o, from, pin
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
