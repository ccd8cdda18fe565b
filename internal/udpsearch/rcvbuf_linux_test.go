//go:build linux

package udpsearch

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pvans-project/pvans/internal/testutil"
)

func rcvbuf(t *testing.T, c *net.UDPConn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var gerr error
	if err := rc.Control(func(fd uintptr) { n, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) }); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	return n
}

// SetReceiveBuffer (a reload of udp.receive_buffer_bytes) changes both
// open sockets' SO_RCVBUF; 0 changes nothing.
func TestSetReceiveBuffer(t *testing.T) {
	s := New(Options{Port: testutil.FreeUDPPort(t), ReceiveBuffer: 256 << 10, InterfaceRefresh: -1})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := rcvbuf(t, s.fam[ip4].search)
	if err := s.SetReceiveBuffer(3 << 20); err != nil {
		t.Fatal(err)
	}
	after, client := rcvbuf(t, s.fam[ip4].search), rcvbuf(t, s.fam[ip4].client)
	// Linux reports twice what was set (bookkeeping overhead); without
	// privilege it is capped at rmem_max, which still differs from 256 KiB.
	if after == before || client != after {
		t.Fatalf("SO_RCVBUF %d → %d (client socket %d)", before, after, client)
	}
	if err := s.SetReceiveBuffer(0); err != nil || rcvbuf(t, s.fam[ip4].search) != after {
		t.Fatalf("0 changed the buffer: %v", err)
	}
}
