package testutil

import (
	"net"
	"testing"
)

// wellKnown are PVA's default ports: a test daemon on them could meet a
// real IOC or another test, so they are never handed out.
func wellKnown(p int) bool { return p == 5075 || p == 5076 }

// FreeTCPPorts returns n distinct TCP ports free on 127.0.0.1 now. They
// are held open together while picked, so they differ from each other.
func FreeTCPPorts(t testing.TB, n int) []uint16 {
	t.Helper()
	var ports []uint16
	for len(ports) < n {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if p := l.Addr().(*net.TCPAddr).Port; !wellKnown(p) {
			ports = append(ports, uint16(p))
		}
	}
	return ports
}

// FreeTCPPort returns a TCP port free on 127.0.0.1 now.
func FreeTCPPort(t testing.TB) uint16 {
	t.Helper()
	return FreeTCPPorts(t, 1)[0]
}

// FreeUDPPort returns a UDP port free on the wildcard address now (the
// daemon binds its search port there).
func FreeUDPPort(t testing.TB) uint16 {
	t.Helper()
	for {
		u, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero})
		if err != nil {
			t.Fatal(err)
		}
		p := u.LocalAddr().(*net.UDPAddr).Port
		u.Close()
		if !wellKnown(p) {
			return uint16(p)
		}
	}
}
