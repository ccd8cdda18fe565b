package tcpsearch

import "golang.org/x/sys/unix"

// freebind sets IP_FREEBIND (IPV6_FREEBIND): bind to an address the host
// does not hold yet.
func freebind(fd uintptr, v4 bool) error {
	if v4 {
		return unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_FREEBIND, 1)
	}
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_FREEBIND, 1)
}
