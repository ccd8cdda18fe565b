package tcpsearch

import (
	"context"
	"net"
	"net/netip"
	"syscall"
)

// listenTCP opens a listener on a, with the freebind option where the
// system has one: an address of pva.interfaces that is not configured
// yet (a host whose network comes up after pvans, as systemd may start
// it) is bound all the same and served once it appears, instead of
// pvans exiting with "cannot assign requested address".
func listenTCP(a netip.AddrPort) (*net.TCPListener, error) {
	lc := net.ListenConfig{}
	if !a.Addr().IsUnspecified() {
		lc.Control = func(network, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) { serr = freebind(fd, a.Addr().Is4() || a.Addr().Is4In6()) }); err != nil {
				return err
			}
			return serr
		}
	}
	ln, err := lc.Listen(context.Background(), "tcp", net.TCPAddrFromAddrPort(a).String())
	if err != nil {
		return nil, err
	}
	return ln.(*net.TCPListener), nil
}
