//go:build linux

package testutil

import (
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

// Two namespaces joined by a veth: a socket made by Do in one reaches a
// socket made in the other, and neither address exists on the host.
func TestNetnsVethAndDo(t *testing.T) {
	RequireNetns(t, "network namespace tests")
	a := NewNetns(t, fmt.Sprintf("pvans-u-%d-a", os.Getpid()))
	b := NewNetns(t, fmt.Sprintf("pvans-u-%d-b", os.Getpid()))
	Veth(t, a, "pvua", []string{"10.204.0.1/24"}, b, "pvub", []string{"10.204.0.2/24"})
	if l, err := net.ListenPacket("udp4", "10.204.0.2:0"); err == nil {
		l.Close()
		t.Fatal("namespace address bound on the host")
	}
	var srv net.PacketConn
	if err := b.Do(func() (err error) { srv, err = net.ListenPacket("udp4", "10.204.0.2:0"); return }); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var cl net.PacketConn
	if err := a.Do(func() (err error) { cl, err = net.ListenPacket("udp4", "10.204.0.1:0"); return }); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.WriteTo([]byte("hi"), srv.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := srv.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "hi" || from.(*net.UDPAddr).IP.String() != "10.204.0.1" {
		t.Fatalf("got %q from %v: %v", buf[:n], from, err)
	}
}
