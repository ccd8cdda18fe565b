//go:build linux

package udpsearch

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

var loopback4 = [4]byte{127, 0, 0, 1}

// listenSearchPort opens the shared wildcard socket on port the way PVXS
// does (docs/protocol.md, "The search port's socket"): SO_REUSEADDR and
// SO_REUSEPORT before bind so pvans and PVXS servers share the port,
// IP_PKTINFO for the destination and arrival interface, SO_RXQ_OVFL for the
// kernel's drop count, the loopback group joined on 127.0.0.1 with
// multicast loop on, and multicast sends leaving through 127.0.0.1 with TTL
// 1. The socket lives in the network namespace of the calling thread.
func listenSearchPort(port uint16, rcvbuf int) (*net.UDPConn, error) {
	conn, err := listenUDP("udp4", netip.AddrPortFrom(netip.IPv4Unspecified(), port), func(f int) error {
		if err := sharePort(f); err != nil {
			return err
		}
		if rcvbuf > 0 {
			_ = sizeRcvbuf(f, rcvbuf)
		}
		countDrops(f)
		return unix.SetsockoptInt(f, unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
	})
	if err != nil {
		return nil, err
	}
	if err := controlConn(conn, joinLoopbackGroup); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// joinLoopbackGroup joins the forward group on 127.0.0.1 and sends
// multicast through 127.0.0.1 (loopbackMulticast).
func joinLoopbackGroup(f int) error {
	mreq := &unix.IPMreq{Multiaddr: ForwardGroup.As4(), Interface: loopback4}
	if err := unix.SetsockoptIPMreq(f, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, mreq); err != nil {
		return errors.Join(errors.New("join 224.0.0.128 on 127.0.0.1 (is lo up with multicast on?)"), err)
	}
	return loopbackMulticast(f)
}

// loopbackMulticast makes multicast sends leave through 127.0.0.1 with
// TTL 1 and loop back to the host's own sockets.
func loopbackMulticast(f int) error {
	if err := unix.SetsockoptInet4Addr(f, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, loopback4); err != nil {
		return err
	}
	if err := unix.SetsockoptInt(f, unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, 1); err != nil {
		return err
	}
	return unix.SetsockoptInt(f, unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, 1)
}

// listenSearchPort6 opens the IPv6 wildcard socket [::]:port beside the
// IPv4 one (IPV6_V6ONLY, as PVXS binds them): the same sharing options,
// IPV6_RECVPKTINFO for the destination and arrival interface. No group is
// joined: PVXS forwards unicast searches over IPv4 loopback multicast only
// and processes IPv6 unicast searches directly.
func listenSearchPort6(port uint16, rcvbuf int) (*net.UDPConn, error) {
	return listenUDP("udp6", netip.AddrPortFrom(netip.IPv6Unspecified(), port), func(f int) error {
		if err := sharePort(f); err != nil {
			return err
		}
		setRcvbuf(f, rcvbuf)
		return unix.SetsockoptInt(f, unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
	})
}

// listenEphemeral6 opens the IPv6 client socket on port, the IPv4 client
// socket's port (PVXS binds its IPv6 search socket to the same port), so
// the one reply port in a search serves both families. IPV6_RECVPKTINFO
// gives each reply's arrival interface (Options.LearnFrom).
func listenEphemeral6(port uint16, rcvbuf int) (*net.UDPConn, error) {
	return listenUDP("udp6", netip.AddrPortFrom(netip.IPv6Unspecified(), port), func(f int) error {
		setRcvbuf(f, rcvbuf)
		return unix.SetsockoptInt(f, unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
	})
}

// listenEphemeral opens an IPv4 socket on port (0: an ephemeral one) with
// SO_BROADCAST (destination lists may hold broadcast addresses). rcvbuf > 0
// sizes its receive buffer and turns on the SO_RXQ_OVFL drop count: the
// client socket takes every server's reply to a discovery ping at once.
// IP_PKTINFO gives each reply's arrival interface (Options.LearnFrom).
func listenEphemeral(port uint16, rcvbuf int) (*net.UDPConn, error) {
	return listenUDP("udp4", netip.AddrPortFrom(netip.IPv4Unspecified(), port), func(f int) error {
		setRcvbuf(f, rcvbuf)
		if err := unix.SetsockoptInt(f, unix.IPPROTO_IP, unix.IP_PKTINFO, 1); err != nil {
			return err
		}
		return unix.SetsockoptInt(f, unix.SOL_SOCKET, unix.SO_BROADCAST, 1)
	})
}

// listenUDP opens a UDP socket on addr with setup applied before bind
// (SO_REUSEPORT and the like must be).
func listenUDP(network string, addr netip.AddrPort, setup func(fd int) error) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error { return control(c, setup) }}
	pc, err := lc.ListenPacket(context.Background(), network, addr.String())
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

// control runs set on c's descriptor: the first error of Control or set.
func control(c syscall.RawConn, set func(fd int) error) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = set(int(fd)) }); err != nil {
		return err
	}
	return serr
}

// controlConn is control on an open socket.
func controlConn(conn *net.UDPConn, set func(fd int) error) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	return control(rc, set)
}

// sharePort lets pvans and PVXS servers bind the same port.
func sharePort(f int) error {
	if err := unix.SetsockoptInt(f, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return err
	}
	return unix.SetsockoptInt(f, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
}

// sizeRcvbuf sets a receive buffer of n bytes: SO_RCVBUFFORCE lifts
// rmem_max when privileged, else SO_RCVBUF (capped by rmem_max).
func sizeRcvbuf(f, n int) error {
	if unix.SetsockoptInt(f, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n) == nil {
		return nil
	}
	return unix.SetsockoptInt(f, unix.SOL_SOCKET, unix.SO_RCVBUF, n)
}

// countDrops turns on the SO_RXQ_OVFL drop count (best effort).
func countDrops(f int) { _ = unix.SetsockoptInt(f, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1) }

// setRcvbuf sizes a receive buffer and turns on the drop count; rcvbuf
// <= 0 does neither.
func setRcvbuf(f, rcvbuf int) {
	if rcvbuf <= 0 {
		return
	}
	_ = sizeRcvbuf(f, rcvbuf)
	countDrops(f)
}

// mmsghdr is struct mmsghdr; Go's padding matches C's on 32 and 64 bits.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

const oobSize = 128 // room for IP_PKTINFO or IPV6_PKTINFO, and SO_RXQ_OVFL

// rxBatch is the reused memory of recvmmsg: headers, buffers, source
// addresses and control messages for n datagrams.
type rxBatch struct {
	hdrs  []mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // room for either family
	oobs  []byte
	bufs  []byte
	size  int

	// drain is serve's rc.Read callback, made once: a fresh closure per
	// call would allocate, with its results, on every receive.
	drain func(fd uintptr) bool
	n     int
	used  int // headers the kernel wrote in the last call
	errno syscall.Errno
	batch func(k int) // serve's handler
}

func newRxBatch(n, size int) *rxBatch {
	r := &rxBatch{
		hdrs: make([]mmsghdr, n), iovs: make([]unix.Iovec, n), names: make([]unix.RawSockaddrInet6, n),
		oobs: make([]byte, n*oobSize), bufs: make([]byte, n*size), size: size, used: n,
	}
	for i := range r.hdrs {
		r.iovs[i].Base = &r.bufs[i*size]
		r.iovs[i].SetLen(size)
		h := &r.hdrs[i].hdr
		h.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		h.Iov = &r.iovs[i]
		h.SetIovlen(1)
		h.Control = &r.oobs[i*oobSize]
	}
	r.drain = r.serveRead
	return r
}

// recvmmsg is called on the non-blocking socket, so it never waits in the
// kernel: it goes in as a raw system call. A plain one (entersyscall) wakes
// the runtime's sysmon thread whenever it is in its deep sleep, which on an
// otherwise idle daemon is every datagram: a futex wake and a 20 µs sleep
// cycle on another thread, about as much CPU as the datagram itself at low
// rates (docs/PERFORMANCE.md, "One pass per datagram"). It reports false on
// EAGAIN; the headers the last call used are made ready first (the kernel
// writes only those, so a quiet daemon touches one, not 64).
func (r *rxBatch) recvmmsg(fd uintptr) bool {
	for i := range r.hdrs[:r.used] {
		h := &r.hdrs[i].hdr
		h.Namelen = unix.SizeofSockaddrInet6
		h.SetControllen(oobSize)
		h.Flags = 0
		r.hdrs[i].n = 0
	}
	r.used = 0
	for {
		r1, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hdrs[0])), uintptr(len(r.hdrs)), 0, 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		r.n, r.errno = int(r1), e
		if e == 0 {
			r.used = r.n
		}
		return true
	}
}

// serve receives until the socket is closed, calling batch with the number
// of datagrams of each recvmmsg. It returns the error that ended it.
func (r *rxBatch) serve(rc syscall.RawConn, batch func(k int)) error {
	r.batch = batch
	for {
		if err := rc.Read(r.drain); err != nil {
			return err
		}
		// A receive error (ICMP-induced ECONNREFUSED and the like) is
		// per-datagram noise: keep receiving.
	}
}

// serveRead is serve's callback: it handles batches inside one rc.Read.
// After a short batch (the queue was empty) it goes straight back to
// waiting, without the recvmmsg that would only say EAGAIN: the poller's
// readiness is not reset within one rc.Read, so a datagram that arrived
// after the last recvmmsg still wakes it. It returns (to serve) only on a
// receive error.
func (r *rxBatch) serveRead(fd uintptr) bool {
	for {
		if !r.recvmmsg(fd) {
			return false
		}
		if r.errno != 0 {
			return true
		}
		r.batch(r.n)
		if r.n < len(r.hdrs) {
			return false
		}
	}
}

// fill describes datagram i in d. It reports false for a datagram cut
// short by the buffer. kernelDrops is set from SO_RXQ_OVFL when present.
func (r *rxBatch) fill(i int, d *datagram, kernelDrops *uint32, haveDrops *bool) bool {
	h := &r.hdrs[i]
	sa := &r.names[i]
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	port := uint16(p[0])<<8 | uint16(p[1])
	if sa.Family == unix.AF_INET {
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		d.src = netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port)
	} else {
		// IPv4-mapped sources cannot arrive (IPV6_V6ONLY); Unmap anyway so
		// one host is one key.
		d.src = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port)
	}
	d.dst, d.ifIndex = netip.Addr{}, 0
	oob := r.oobs[i*oobSize : i*oobSize+int(h.hdr.Controllen)]
	for len(oob) >= unix.SizeofCmsghdr {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(c.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			break
		}
		data := oob[unix.CmsgLen(0):l]
		switch {
		case c.Level == unix.IPPROTO_IP && c.Type == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&data[0]))
			d.dst, d.ifIndex = netip.AddrFrom4(pi.Addr), int(pi.Ifindex)
		case c.Level == unix.IPPROTO_IPV6 && c.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			pi := (*unix.Inet6Pktinfo)(unsafe.Pointer(&data[0]))
			d.dst, d.ifIndex = netip.AddrFrom16(pi.Addr).Unmap(), int(pi.Ifindex)
		case c.Level == unix.SOL_SOCKET && c.Type == unix.SO_RXQ_OVFL && len(data) >= 4:
			*kernelDrops = *(*uint32)(unsafe.Pointer(&data[0]))
			*haveDrops = true
		}
		adv := unix.CmsgSpace(l - unix.CmsgLen(0))
		if adv > len(oob) {
			break
		}
		oob = oob[adv:]
	}
	d.b = r.bufs[i*r.size : i*r.size+int(h.n)]
	return h.hdr.Flags&unix.MSG_TRUNC == 0
}

// sockSender sends replies and forwards from a search port socket: the
// IPv4 one, or the IPv6 one (conn6, nil when not open) for IPv6
// destinations. A sender is used by one goroutine at a time (its
// control-message scratch is its own).
type sockSender struct {
	conn, conn6 *net.UDPConn
	st          *counters
	group       netip.AddrPort
	oob         []byte
	// fwd, when set, is the forwarder socket (listenForwarder), connected
	// to the group.
	fwd *net.UDPConn
	// tx, when set, queues replies until flush (txbatch_linux.go); only
	// the search port's receive goroutine may use such a sender.
	tx *txBatch
	// fw sends on fwd with a raw system call (forward_linux.go).
	fw *rawWriter
}

func newSockSender(conn, conn6 *net.UDPConn, st *counters, port uint16) *sockSender {
	return &sockSender{conn: conn, conn6: conn6, st: st, group: netip.AddrPortFrom(ForwardGroup, port),
		oob: make([]byte, unix.CmsgSpace(unix.SizeofInet6Pktinfo))}
}

// reply pins the interface and source address with IP_PKTINFO or
// IPV6_PKTINFO (as PVXS's sendtox does), so the client sees the answer
// come from the address it searched on.
func (s *sockSender) reply(b []byte, to netip.AddrPort, from netip.Addr, ifIndex int) {
	if !to.Addr().Is4() {
		s.reply6(b, to, from, ifIndex)
		return
	}
	if s.tx != nil {
		s.tx.add(b, to, from, ifIndex)
		return
	}
	var oob []byte
	if from.IsValid() || ifIndex != 0 {
		clear(s.oob)
		c := (*unix.Cmsghdr)(unsafe.Pointer(&s.oob[0]))
		c.Level, c.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
		c.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
		pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&s.oob[unix.CmsgLen(0)]))
		pi.Ifindex = int32(ifIndex)
		if from.Is4() {
			pi.Spec_dst = from.As4()
			pi.Addr = pi.Spec_dst
		}
		oob = s.oob[:unix.CmsgSpace(unix.SizeofInet4Pktinfo)]
	}
	if _, _, err := s.conn.WriteMsgUDPAddrPort(b, oob, to); err != nil {
		s.st.sendErrors.Add(1)
	}
}

func (s *sockSender) reply6(b []byte, to netip.AddrPort, from netip.Addr, ifIndex int) {
	if s.conn6 == nil {
		s.st.sendErrors.Add(1)
		return
	}
	var oob []byte
	if (from.IsValid() && from.Is6()) || ifIndex != 0 {
		clear(s.oob)
		c := (*unix.Cmsghdr)(unsafe.Pointer(&s.oob[0]))
		c.Level, c.Type = unix.IPPROTO_IPV6, unix.IPV6_PKTINFO
		c.SetLen(unix.CmsgLen(unix.SizeofInet6Pktinfo))
		pi := (*unix.Inet6Pktinfo)(unsafe.Pointer(&s.oob[unix.CmsgLen(0)]))
		pi.Ifindex = uint32(ifIndex)
		if from.Is6() {
			pi.Addr = from.As16()
		}
		oob = s.oob[:unix.CmsgSpace(unix.SizeofInet6Pktinfo)]
	}
	if _, _, err := s.conn6.WriteMsgUDPAddrPort(b, oob, to); err != nil {
		s.st.sendErrors.Add(1)
	}
}

// flush sends the queued replies, if any.
func (s *sockSender) flush() {
	if s.tx != nil {
		s.tx.flush()
	}
}

func (s *sockSender) forward(b []byte) {
	var err error
	if s.fw != nil {
		err = s.fw.send(b)
	} else if s.fwd != nil {
		_, err = s.fwd.Write(b)
	} else {
		_, err = s.conn.WriteToUDPAddrPort(b, s.group)
	}
	if err != nil {
		s.st.sendErrors.Add(1)
	}
}

// prepMulticast sets the TTL and the outgoing interface of conn for the
// next send to the group d (PVXS evsocket::mcast_prep_sendto). The options
// belong to the socket, so the caller serialises sends on conn.
func prepMulticast(conn *net.UDPConn, d *sendDest) error {
	ttl := d.TTL
	if ttl < 0 {
		ttl = 1 // what the kernel makes of PVXS's -1
	}
	return controlConn(conn, func(f int) error {
		if d.Addr.Addr().Is4() {
			if err := unix.SetsockoptInt(f, unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, ttl); err != nil {
				return err
			}
			m := &unix.IPMreqn{Ifindex: int32(d.ifIndex)}
			if d.ifAddr.IsValid() {
				m.Address = d.ifAddr.As4()
			}
			return unix.SetsockoptIPMreqn(f, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, m)
		}
		if err := unix.SetsockoptInt(f, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_HOPS, ttl); err != nil {
			return err
		}
		return unix.SetsockoptInt(f, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_IF, d.ifIndex)
	})
}

// setReceiveBuffer sets SO_RCVBUF on an open socket (SO_RCVBUFFORCE when
// privileged, as at open).
func setReceiveBuffer(c *net.UDPConn, n int) error {
	return controlConn(c, func(f int) error { return sizeRcvbuf(f, n) })
}

// joinGroup joins the group d on conn, on d's interface (PVXS
// SockEndpoint::resolve then mcast_join).
func joinGroup(conn *net.UDPConn, d *sendDest) error {
	return controlConn(conn, func(f int) error {
		if d.Addr.Addr().Is4() {
			m := &unix.IPMreqn{Multiaddr: d.Addr.Addr().As4(), Ifindex: int32(d.ifIndex)}
			if d.ifAddr.IsValid() {
				m.Address = d.ifAddr.As4()
			}
			return unix.SetsockoptIPMreqn(f, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, m)
		}
		m := &unix.IPv6Mreq{Multiaddr: d.Addr.Addr().As16(), Interface: uint32(d.ifIndex)}
		return unix.SetsockoptIPv6Mreq(f, unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP, m)
	})
}
