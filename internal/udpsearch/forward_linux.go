//go:build linux

package udpsearch

import (
	"context"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// listenForwarder opens the socket pvans forwards unicast searches from:
// bound to 127.0.0.1 on an ephemeral port of its own and connected to the
// loopback group on the search port, with multicast leaving through
// 127.0.0.1, TTL 1 and loop on (every socket on the host that joined the
// group receives the copy, pvans's own search port included).
//
// PVXS forwards from its search port socket. pvans uses a socket of its
// own so that its own looped copy is known by its source address alone
// (nothing else can send from 127.0.0.1 and this port) and dropped before
// any decoding: the search was answered from the original. Being
// connected, the socket caches the route for every forward and takes no
// datagram from anywhere but the group, which never sends.
func listenForwarder(port uint16) (*net.UDPConn, error) {
	d := net.Dialer{
		LocalAddr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom4(loopback4), 0)),
		Control:   func(_, _ string, c syscall.RawConn) error { return control(c, loopbackMulticast) },
	}
	c, err := d.DialContext(context.Background(), "udp4", netip.AddrPortFrom(ForwardGroup, port).String())
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}

// socketInode is the inode of conn's socket, the number sock_diag reports
// it by.
func socketInode(conn *net.UDPConn) (uint64, error) {
	var st unix.Stat_t
	err := controlConn(conn, func(f int) error { return unix.Fstat(f, &st) })
	return st.Ino, err
}

// rawWriter writes datagrams on a connected non-blocking socket with a raw
// system call: it never waits in the kernel, and a plain one would wake
// the runtime's sysmon on an idle daemon (see rxBatch.recvmmsg). Used
// from one goroutine at a time.
type rawWriter struct {
	rc    syscall.RawConn
	b     []byte
	errno syscall.Errno
	write func(fd uintptr) bool // made once: a closure per call allocates
}

func newRawWriter(conn *net.UDPConn) (*rawWriter, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	w := &rawWriter{rc: rc}
	w.write = w.writeFD
	return w, nil
}

func (w *rawWriter) writeFD(fd uintptr) bool {
	for {
		_, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&w.b[0])), uintptr(len(w.b)))
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // rc.Write waits for room, as conn.Write would
		}
		w.errno = e
		return true
	}
}

func (w *rawWriter) send(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	w.b, w.errno = b, 0
	err := w.rc.Write(w.write)
	w.b = nil
	if err != nil {
		return err
	}
	if w.errno != 0 {
		return w.errno
	}
	return nil
}
