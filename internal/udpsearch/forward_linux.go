//go:build linux

package udpsearch

import (
	"context"
	"net"
	"net/netip"
	"syscall"

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
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				f := int(fd)
				if serr = unix.SetsockoptInet4Addr(f, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, loopback4); serr != nil {
					return
				}
				if serr = unix.SetsockoptInt(f, unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, 1); serr != nil {
					return
				}
				serr = unix.SetsockoptInt(f, unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, 1)
			}); err != nil {
				return err
			}
			return serr
		},
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
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var st unix.Stat_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), &st) }); err != nil {
		return 0, err
	}
	return st.Ino, serr
}
