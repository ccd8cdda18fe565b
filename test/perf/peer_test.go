//go:build linux

package perf

import (
	"net"
	"os"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// portPeer is another socket on a daemon's search port, as a PVXS server
// on the same host has: bound to the loopback group address (so it takes
// no unicast away from the daemon) on the port, member of the group on
// 127.0.0.1. It reads and counts what it receives, so pvans sees a host
// where every unicast search must be forwarded.
type portPeer struct {
	conn *net.UDPConn
	mu   sync.Mutex
	n    int
	wg   sync.WaitGroup
}

func startPortPeer(t *testing.T, port uint16) *portPeer {
	t.Helper()
	group := [4]byte{224, 0, 0, 128}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "peer")
	defer f.Close()
	for _, o := range []int{unix.SO_REUSEADDR, unix.SO_REUSEPORT} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o, 1); err != nil {
			t.Fatal(err)
		}
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(port), Addr: group}); err != nil {
		t.Fatal(err)
	}
	mreq := &unix.IPMreq{Multiaddr: group, Interface: [4]byte{127, 0, 0, 1}}
	if err := unix.SetsockoptIPMreq(fd, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, mreq); err != nil {
		t.Fatal(err)
	}
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	p := &portPeer{conn: c.(*net.UDPConn)}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		buf := make([]byte, 65536)
		for {
			if _, _, err := p.conn.ReadFromUDPAddrPort(buf); err != nil {
				return
			}
			p.mu.Lock()
			p.n++
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() { p.conn.Close(); p.wg.Wait() })
	return p
}

func (p *portPeer) received() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}
