//go:build linux

package udpsearch

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvans-project/pvans/internal/pva"
)

// pvans's own searches and discovery pings carry the Unicast flag exactly
// where a PVXS client sets it (client.cpp: every destination but multicast
// groups and the host's interface broadcast addresses), whatever flag the
// caller built the datagram with. A pvAccessCPP server sharing the host
// forwards a unicast search to the other local servers only when the flag
// is set.
func TestSendSearchUnicastFlagPerDestination(t *testing.T) {
	ns := newNetns(t)
	peer := newNetns(t)
	veth(t, ns, "10.77.0.1/24", peer, "10.77.0.2/24")

	rx := func(addr string) *net.UDPConn { return udpIn(t, ns, addr) }
	lo, own, bcast := rx("127.0.0.1:0"), rx("10.77.0.1:0"), rx("0.0.0.0:0")
	group := rx("0.0.0.0:0")
	rc, _ := group.SyscallConn()
	var jerr error
	rc.Control(func(fd uintptr) {
		jerr = unix.SetsockoptIPMreq(int(fd), unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP,
			&unix.IPMreq{Multiaddr: [4]byte{224, 0, 0, 128}, Interface: loopback4})
	})
	if jerr != nil {
		t.Fatal(jerr)
	}
	port := func(c *net.UDPConn) uint16 { return c.LocalAddr().(*net.UDPAddr).AddrPort().Port() }
	dests := []struct {
		to      netip.AddrPort
		c       *net.UDPConn
		unicast bool
	}{
		{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port(lo)), lo, true},
		{netip.AddrPortFrom(netip.MustParseAddr("10.77.0.1"), port(own)), own, true},
		{netip.AddrPortFrom(netip.MustParseAddr("10.77.0.255"), port(bcast)), bcast, false},
		{netip.AddrPortFrom(ForwardGroup, port(group)), group, false},
	}
	var list []netip.AddrPort
	for _, d := range dests {
		list = append(list, d.to)
	}
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, AddrList: Unicast(list...)})

	for _, built := range []uint8{0, pva.SearchUnicast, pva.SearchMustReply, pva.SearchMustReply | pva.SearchUnicast} {
		msg := searchMsg(built, netip.Addr{}, s.ClientAddr().Port(), []string{"tcp"}, "x:1")
		results := map[netip.AddrPort]error{}
		if err := s.SendSearch(msg, func(to netip.AddrPort, err error) { results[to] = err }); err != nil {
			t.Fatalf("send: %v", err)
		}
		// Each destination's socket is read for 500 ms of quiet after its
		// datagram (a second one would show), all four at once.
		got := make([][]rxMsg, len(dests))
		var wg sync.WaitGroup
		for i, d := range dests {
			wg.Go(func() { got[i] = collect(d.c, 500*time.Millisecond, 1) })
		}
		wg.Wait()
		for i, d := range dests {
			if err, ok := results[d.to]; !ok || err != nil {
				t.Fatalf("destination %v not reported sent: %v %v", d.to, ok, err)
			}
			got := got[i]
			if len(got) != 1 {
				t.Fatalf("%v: %d datagrams", d.to, len(got))
			}
			h, p, _, err := pva.SplitMessage(got[0].b)
			var m pva.Search
			if err != nil || m.Decode(p, h.BigEndian()) != nil {
				t.Fatalf("%v: undecodable %x", d.to, got[0].b)
			}
			want := built&^pva.SearchUnicast | map[bool]uint8{true: pva.SearchUnicast}[d.unicast]
			if m.Flags != want {
				t.Errorf("%v (built %#x): flags %#x, want %#x", d.to, built, m.Flags, want)
			}
			if m.MustReply() != (built&pva.SearchMustReply != 0) || m.ReplyPort != s.ClientAddr().Port() || !m.ReplyAddr.IsAny() {
				t.Errorf("%v: other fields changed: %+v", d.to, m)
			}
		}
	}
	if !s.UnicastDestination(netip.MustParseAddr("255.255.255.255")) {
		t.Error("255.255.255.255 is no interface's broadcast address: PVXS flags it unicast")
	}
}
