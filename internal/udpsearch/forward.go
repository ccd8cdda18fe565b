package udpsearch

import (
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
)

// DefaultPortPeerCheck is how stale the answer to "does any other socket
// on this host share the search port?" may be when a unicast search
// arrives; see portPeers. The kernel walks every UDP socket of the
// namespace for each count (about 0.7 ms with 2,000 sockets on the
// measuring VM), so not much more often than this.
const DefaultPortPeerCheck = time.Second

// forward sends a unicast search to the loopback group, with an origin tag
// naming the address it was sent to and the client's address as reply
// address (as PVXS does), when some other socket on the host can receive
// it. It reports false for a search that cannot be forwarded: it is then
// not answered either.
func (h *handler) forward(d *datagram, msg []byte, to netip.Addr) bool {
	if h.peers != nil && !h.peers.mustForward() {
		h.st.forwardsSkipped.Add(1)
		return true
	}
	var err error
	h.buf, err = pva.AppendForward(h.buf[:0], pva.AddressFrom(d.dst), msg, pva.AddressFrom(to))
	if err != nil {
		h.st.dropMalformed.Add(1)
		return false
	}
	h.st.forwards.Add(1)
	h.out.forward(h.buf)
	return true
}

// ownCopy reports whether d is pvans's own forward looped back to it
// through the group. The search was answered from the original, so the
// copy is dropped here, before any decoding: only the forwarder socket
// sends from its address.
func (h *handler) ownCopy(d *datagram) bool {
	if !h.ownSrc.IsValid() || d.src != h.ownSrc {
		return false
	}
	h.st.ownCopies.Add(1)
	return true
}

// portPeers decides whether a unicast search must be forwarded to the
// loopback group: only when some other socket on the host (in this
// network namespace) is bound to the search port, since only such a
// socket can receive the copy. Without one the forward would reach pvans
// alone, and a gateway host with no local IOC pays no multicast cost.
//
// The answer comes from sock_diag (count), asked again when it is older
// than every at the time a unicast search needs it, and at once after a
// beacon from a local address (a server starting on this host announces
// itself). A forwarded copy from another local forwarder proves a peer
// without asking. A failed count means "forward": the check can only ever
// remove forwards nobody would receive.
//
// It is used from the search port's receive goroutine only.
type portPeers struct {
	count func() (int, error)
	clk   clock.Clock
	every time.Duration
	st    *fwdCounters
	log   *zap.Logger

	checked time.Time
	valid   bool // checked at least once
	stale   bool // a local server beaconed since the last check
	others  bool
	warned  bool
}

func (p *portPeers) mustForward() bool {
	now := p.clk.Now()
	if p.stale || !p.valid || now.Sub(p.checked) >= p.every {
		p.recheck(now)
	}
	return p.others
}

func (p *portPeers) recheck(now time.Time) {
	n, err := p.count()
	p.checked, p.valid, p.stale = now, true, false
	p.st.peerChecks.Add(1)
	if err != nil {
		p.others = true
		p.st.peerCheckErrors.Add(1)
		if !p.warned {
			p.warned = true
			p.log.Warn("cannot count the sockets sharing the search port (sock_diag); forwarding every unicast search", zap.Error(err))
		}
		return
	}
	p.others = n > 0
	p.st.portPeers.Store(int64(n))
}

// forwarderSeen records a forwarded copy from another local forwarder:
// someone else shares the port.
func (p *portPeers) forwarderSeen() {
	if !p.others {
		p.others, p.checked, p.valid = true, p.clk.Now(), true
	}
}

// localBeacon records a beacon from a local address: a server on this
// host may have just bound the port; ask again before the next forward
// decision.
func (p *portPeers) localBeacon() { p.stale = true }

// noteBeacon: a beacon from a local address may come from a server that
// has just bound the search port.
func (h *handler) noteBeacon(d *datagram, t *ifaceTable) {
	if h.peers == nil {
		return
	}
	if a := d.src.Addr(); a.IsLoopback() || t.local[a] != 0 {
		h.peers.localBeacon()
	}
}

// noteForwarder: a forwarded copy from another local forwarder.
func (h *handler) noteForwarder() {
	if h.peers != nil {
		h.peers.forwarderSeen()
	}
}

// fwdCounters are the forwarding decision's.
type fwdCounters struct {
	// forwardsSkipped are unicast searches not forwarded: no other socket
	// on the host was bound to the search port.
	forwardsSkipped metrics.Counter `metric:"pvans_udp_forwards_skipped_total" help:"Unicast searches not forwarded: no other socket on the host was bound to the search port."`
	// ownCopies are pvans's own forwards received back from the group and
	// dropped unread (the search was answered from the original).
	ownCopies atomic.Uint64
	// portPeers is the last count of other sockets bound to the search
	// port; peerChecks and peerCheckErrors count the sock_diag queries.
	portPeers                   atomic.Int64
	peerChecks, peerCheckErrors atomic.Uint64
}

// listenForward opens the forwarder socket, makes out forward through it,
// teaches the IPv4 search port handler its address (own copies) and sets
// up the port peer check over the search port sockets' inodes. Only IPv4
// unicast searches are forwarded.
func (s *Server) listenForward(out *sockSender) error {
	v4, v6 := s.fam[ip4], s.fam[ip6]
	fwd, err := listenForwarder(s.o.Port)
	if err != nil {
		return err
	}
	s.fwd, out.fwd = fwd, fwd
	if w, err := newRawWriter(fwd); err == nil {
		out.fw = w
	}
	v4.h.ownSrc = fwd.LocalAddr().(*net.UDPAddr).AddrPort()
	s.st.portPeers.Store(-1)
	if s.o.PortPeerCheck < 0 {
		return nil
	}
	own, err := socketInode(v4.search)
	if err != nil {
		fwd.Close()
		return err
	}
	// Opened here, in the namespace the sockets live in (the receive
	// goroutine may run on any thread); closed after it has stopped.
	if s.diag, err = openSockDiag(); err != nil {
		fwd.Close()
		return err
	}
	owns := []uint64{own}
	if v6.search != nil { // pvans's own IPv6 search port socket is no peer
		if own6, err := socketInode(v6.search); err == nil {
			owns = append(owns, own6)
		}
	}
	port, diag := s.o.Port, s.diag
	v4.h.peers = &portPeers{count: func() (int, error) { return diag.otherSocketsOnPort(port, owns) },
		clk: s.o.Clock, every: s.o.PortPeerCheck, st: &s.st.fwdCounters, log: s.o.Logger}
	return nil
}

// closeForward releases what listenForward opened besides the forwarder
// socket, once the receive goroutines have stopped.
func (s *Server) closeForward() error {
	if s.diag == nil {
		return nil
	}
	return s.diag.close()
}

// batchReplies gives f's search port handler a sender of its own that
// queues replies until the receive batch is handled (f.batch, flushed by
// its receive loop); the client socket's handler keeps out. The queue
// takes IPv4 replies only.
func (s *Server) batchReplies(f *family, out *sockSender) {
	tx, err := newTxBatch(f.search, &s.st)
	if err != nil {
		return
	}
	mo := *out
	mo.tx = tx
	f.batch = &mo
	f.h.out = f.batch
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
