//go:build linux

package udpsearch

import (
	"net"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/testutil"
)

// SetSendBeacons (a reload of udp.send_beacons): off at start, no beacon;
// on, a beacon at once on a socket opened then; off and on again, the
// schedule restarts with a beacon at once and the change count carried on.
func TestSetSendBeacons(t *testing.T) {
	dest, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer dest.Close()
	s := New(Options{Port: testutil.FreeUDPPort(t), GUID: ownGUID, TCPPort: 5075, InterfaceRefresh: -1,
		BeaconAddrList: []Destination{{Addr: dest.LocalAddr().(*net.UDPAddr).AddrPort()}}})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer s.Close()
	beacon := func(wait time.Duration) (pva.Beacon, bool) {
		_ = dest.SetReadDeadline(time.Now().Add(wait))
		buf := make([]byte, 1500)
		n, _, err := dest.ReadFromUDPAddrPort(buf)
		if err != nil {
			return pva.Beacon{}, false
		}
		h, p, _, err := pva.SplitMessage(buf[:n])
		var b pva.Beacon
		if err != nil || h.Command != pva.CmdBeacon || b.Decode(p, h.BigEndian()) != nil {
			t.Fatalf("not a beacon: %x", buf[:n])
		}
		return b, true
	}
	if _, ok := beacon(300 * time.Millisecond); ok {
		t.Fatal("beacon sent with send_beacons off")
	}
	if err := s.SetSendBeacons(true); err != nil {
		t.Fatal(err)
	}
	b, ok := beacon(5 * time.Second)
	if !ok || b.GUID != ownGUID || b.Port != 5075 {
		t.Fatalf("no beacon after SetSendBeacons(true): %+v %v", b, ok)
	}
	s.BumpChangeCount()
	if err := s.SetSendBeacons(false); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSendBeacons(true); err != nil {
		t.Fatal(err)
	}
	b2, ok := beacon(5 * time.Second)
	if !ok || b2.ChangeCount != b.ChangeCount+1 || b2.Sequence <= b.Sequence {
		t.Fatalf("after off and on: %+v (first %+v)", b2, b)
	}
}
