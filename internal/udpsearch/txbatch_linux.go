//go:build linux

package udpsearch

import (
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Replies to the searches of one receive batch are queued here and sent
// with one sendmmsg when the batch has been handled, instead of one
// sendmsg each: at high rates the system call per reply is a large share
// of the answer's cost. Each queued reply keeps its own destination and
// IP_PKTINFO (source address and interface), as a single send would.
const (
	txMax      = 64       // replies queued at most before a flush
	txArena    = 64 << 10 // bytes of replies queued at most
	txOOBSpace = 32       // unix.CmsgSpace(unix.SizeofInet4Pktinfo)
)

type txBatch struct {
	hdrs  [txMax]mmsghdr
	iovs  [txMax]unix.Iovec
	names [txMax]unix.RawSockaddrInet4
	oobs  [txMax * txOOBSpace]byte
	arena [txArena]byte
	n     int // queued
	used  int // arena bytes
	sent  int // of the queued, sent so far in this flush

	rc    syscall.RawConn
	st    *counters
	write func(fd uintptr) bool // rc.Write callback, made once
}

func newTxBatch(conn *net.UDPConn, st *counters) (*txBatch, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	t := &txBatch{rc: rc, st: st}
	for i := range t.hdrs {
		h := &t.hdrs[i].hdr
		h.Name = (*byte)(unsafe.Pointer(&t.names[i]))
		h.Namelen = unix.SizeofSockaddrInet4
		h.Iov = &t.iovs[i]
		h.SetIovlen(1)
	}
	t.write = t.sendmmsg
	return t, nil
}

// add queues b for to, from the local address from through interface
// ifIndex (invalid from and 0: no pinning). A full batch is flushed first.
func (t *txBatch) add(b []byte, to netip.AddrPort, from netip.Addr, ifIndex int) {
	if len(b) > len(t.arena) || !to.Addr().Is4() {
		t.st.sendErrors.Add(1)
		return
	}
	if t.n == txMax || t.used+len(b) > len(t.arena) {
		t.flush()
	}
	i := t.n
	p := t.arena[t.used : t.used+len(b)]
	copy(p, b)
	t.used += len(b)
	t.iovs[i].Base = &p[0]
	t.iovs[i].SetLen(len(b))
	sa := &t.names[i]
	sa.Family = unix.AF_INET
	pp := (*[2]byte)(unsafe.Pointer(&sa.Port))
	pp[0], pp[1] = byte(to.Port()>>8), byte(to.Port())
	sa.Addr = to.Addr().As4()
	h := &t.hdrs[i].hdr
	if from.IsValid() || ifIndex != 0 {
		oob := t.oobs[i*txOOBSpace : (i+1)*txOOBSpace]
		clear(oob)
		c := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		c.Level, c.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
		c.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
		pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&oob[unix.CmsgLen(0)]))
		pi.Ifindex = int32(ifIndex)
		if from.Is4() {
			pi.Spec_dst = from.As4()
			pi.Addr = pi.Spec_dst
		}
		h.Control = &oob[0]
		h.SetControllen(txOOBSpace)
	} else {
		h.Control = nil
		h.SetControllen(0)
	}
	t.n++
}

// sendmmsg sends what is left of the queue. The socket is non-blocking,
// so the call never waits in the kernel and goes in as a raw system call
// (a plain one wakes the runtime's sysmon; see rxBatch.recvmmsg). It
// reports false only when the socket buffer is full (EAGAIN), so that
// rc.Write waits for room as a single send would.
func (t *txBatch) sendmmsg(fd uintptr) bool {
	for t.sent < t.n {
		r1, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&t.hdrs[t.sent])), uintptr(t.n-t.sent), 0, 0, 0)
		switch e {
		case 0:
			t.sent += int(r1)
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default:
			// The first unsent reply failed (an unreachable destination
			// and the like): count it and go on with the rest.
			t.st.sendErrors.Add(1)
			t.sent++
		}
	}
	return true
}

// flush sends every queued reply.
func (t *txBatch) flush() {
	if t.n == 0 {
		return
	}
	t.sent = 0
	if err := t.rc.Write(t.write); err != nil {
		t.st.sendErrors.Add(uint64(t.n - t.sent))
	}
	t.n, t.used = 0, 0
}
