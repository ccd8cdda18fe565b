//go:build linux

package udpsearch

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/testutil"
)

// groupReceiver joins group on the interface with address ifAddr inside
// n and reports each datagram's TTL (IP_RECVTTL).
func groupReceiver(t *testing.T, n *netns, group netip.AddrPort, ifAddr netip.Addr) *net.UDPConn {
	t.Helper()
	c := udpIn(t, n, group.String())
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		mreq := &unix.IPMreq{Multiaddr: group.Addr().As4(), Interface: ifAddr.As4()}
		if serr = unix.SetsockoptIPMreq(int(fd), unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, mreq); serr != nil {
			return
		}
		if serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0); serr != nil {
			return
		}
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTTL, 1)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	return c
}

// readTTL reads one datagram and its TTL.
func readTTL(t *testing.T, c *net.UDPConn) ([]byte, int) {
	t.Helper()
	b, oob := make([]byte, 2048), make([]byte, 256)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, oobn, _, _, err := c.ReadMsgUDP(b, oob)
	if err != nil {
		t.Fatalf("no datagram on the group: %v", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TTL && len(m.Data) >= 4 {
			return b[:n], int(int32(m.Data[0]) | int32(m.Data[1])<<8 | int32(m.Data[2])<<16 | int32(m.Data[3])<<24)
		}
	}
	t.Fatal("no IP_TTL control message")
	return nil, 0
}

// A multicast address-list entry is sent with its TTL through its
// interface (PVXS mcast_prep_sendto): pvans's namespace routes the whole
// 224.0.0.0/4 to lo, so only @iface gets the datagram onto the link, and
// the receiver one hop away sees the TTL the entry gave. An entry
// without a TTL goes out with the kernel default, 1.
func TestMulticastDestinationTTLAndInterface(t *testing.T) {
	a, b := newNetns(t), newNetns(t)
	i := nsSeq.Add(1)
	an, bn := fmt.Sprintf("pvm%d", i), fmt.Sprintf("pvn%d", i)
	testutil.Veth(t, a.Netns, an, []string{"10.77.0.1/24"}, b.Netns, bn, []string{"10.77.0.2/24"})

	g1 := netip.MustParseAddrPort("239.255.7.1:5076")
	g2 := netip.MustParseAddrPort("239.255.7.2:5077")
	r1 := groupReceiver(t, b, g1, netip.MustParseAddr("10.77.0.2"))
	r2 := groupReceiver(t, b, g2, netip.MustParseAddr("10.77.0.2"))

	s := startServer(t, a, Options{GUID: ownGUID, TCPPort: 5075, Port: 5076, InterfaceRefresh: -1,
		AddrList: []Destination{
			{Addr: g1, TTL: 7, Iface: an},                           // by name
			{Addr: g2, TTL: -1, Iface: "10.77.0.1"},                 // by address, no TTL
			{Addr: netip.MustParseAddrPort("127.0.0.1:9"), TTL: -1}, // unicast beside them
		}})
	msg := searchMsg(pva.SearchMustReply, netip.Addr{}, s.ClientAddr().Port(), nil)
	// A fresh veth may drop the first datagrams: send until the first
	// group hears one.
	sent := 0
	for start := time.Now(); ; {
		if err := s.SendSearch(msg, nil); err != nil {
			t.Fatal(err)
		}
		sent++
		r1.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, _, err := r1.ReadFromUDPAddrPort(make([]byte, 2048)); err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("nothing reached the group through the named interface")
		}
	}
	if err := s.SendSearch(msg, nil); err != nil {
		t.Fatal(err)
	}
	sent++
	// Groups get the search with the Unicast flag clear (SendSearch sets
	// it per destination, in place: the unicast entry sets it last).
	want := append([]byte(nil), msg...)
	pva.SetSearchUnicast(want, false)
	got, ttl := readTTL(t, r1)
	if string(got) != string(want) || ttl != 7 {
		t.Errorf("group 1: TTL %d (want 7), same bytes %v", ttl, string(got) == string(want))
	}
	got, ttl = readTTL(t, r2)
	if string(got) != string(want) || ttl != 1 {
		t.Errorf("group 2: TTL %d (want the default 1), same bytes %v", ttl, string(got) == string(want))
	}
	if s.st.clientSearches.Load() != uint64(3*sent) || s.st.sendErrors.Load() != 0 {
		t.Errorf("stats %+v", metrics.Sprint(&s.st))
	}
}

// The IPv6 form of the documentation's example ([ff02::42:1],1@br0): an
// IPv6 group is sent to from the IPv6 client socket with its hop limit,
// through the interface named.
func TestIPv6MulticastDestination(t *testing.T) {
	a, b := newNetns(t), newNetns(t)
	i := nsSeq.Add(1)
	an, bn := fmt.Sprintf("pvm%d", i), fmt.Sprintf("pvn%d", i)
	testutil.Veth(t, a.Netns, an, []string{"fd00:77::1/64 nodad"}, b.Netns, bn, []string{"fd00:77::2/64 nodad"})
	group := netip.MustParseAddrPort("[ff02::42:1]:5077")
	var r *net.UDPConn
	if err := b.Do(func() error {
		ifi, err := net.InterfaceByName(bn)
		if err != nil {
			return err
		}
		pc, err := net.ListenPacket("udp6", "[::]:5077")
		if err != nil {
			return err
		}
		r = pc.(*net.UDPConn)
		rc, err := r.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		err = rc.Control(func(fd uintptr) {
			mreq := &unix.IPv6Mreq{Multiaddr: group.Addr().As16(), Interface: uint32(ifi.Index)}
			if serr = unix.SetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP, mreq); serr != nil {
				return
			}
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVHOPLIMIT, 1)
		})
		if err == nil {
			err = serr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	s := startServer(t, a, Options{GUID: ownGUID, TCPPort: 5075, Port: 5076, InterfaceRefresh: -1, IPv6: true,
		AddrList: []Destination{{Addr: group, TTL: 3, Iface: an}}})
	msg := searchMsg(pva.SearchMustReply, netip.Addr{}, s.ClientAddr().Port(), nil)
	buf, oob := make([]byte, 2048), make([]byte, 256)
	for start := time.Now(); ; {
		if err := s.SendSearch(msg, nil); err != nil {
			// The group's route through the new veth can lag its coming
			// up on a loaded machine ("network is unreachable"): retry.
			if time.Since(start) > 10*time.Second {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		r.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, oobn, _, src, err := r.ReadMsgUDPAddrPort(buf, oob)
		if err == nil {
			if string(buf[:n]) != string(msg) {
				t.Fatalf("group got other bytes")
			}
			if src.Port() != s.ClientAddr().Port() {
				t.Errorf("sent from port %d, want the client port %d (shared by both families)", src.Port(), s.ClientAddr().Port())
			}
			msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
			hops := -1
			for _, m := range msgs {
				if m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_HOPLIMIT && len(m.Data) >= 4 {
					hops = int(int32(m.Data[0]) | int32(m.Data[1])<<8 | int32(m.Data[2])<<16 | int32(m.Data[3])<<24)
				}
			}
			if hops != 3 {
				t.Errorf("hop limit %d, want 3", hops)
			}
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("nothing reached the IPv6 group through the named interface")
		}
	}
}

// A multicast entry of the interface list (group@iface) is joined: a
// search a client sends to the group through the link is answered, from
// pvans's address on that link. Without the join nothing arrives.
func TestSearchGroupJoined(t *testing.T) {
	a, b := newNetns(t), newNetns(t)
	i := nsSeq.Add(1)
	an, bn := fmt.Sprintf("pvm%d", i), fmt.Sprintf("pvn%d", i)
	testutil.Veth(t, a.Netns, an, []string{"10.78.0.1/24"}, b.Netns, bn, []string{"10.78.0.2/24"})
	group := netip.MustParseAddrPort("239.255.19.1:5076")
	s := startServer(t, a, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true, InterfaceRefresh: -1,
		Groups:   []Destination{{Addr: group, TTL: -1, Iface: an}},
		Resolver: newMapResolver(map[string]resolver.Endpoint{"pvans:held": srvX})})
	client := udpIn(t, b, "10.78.0.2:0")
	setSockInt(t, client, unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, 1)
	rc, _ := client.SyscallConn()
	var serr error
	rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInet4Addr(int(fd), unix.IPPROTO_IP, unix.IP_MULTICAST_IF, [4]byte{10, 78, 0, 2})
	})
	if serr != nil {
		t.Fatal(serr)
	}
	msg := searchMsg(0, netip.Addr{}, client.LocalAddr().(*net.UDPAddr).AddrPort().Port(), []string{"tcp"}, "pvans:held")
	buf := make([]byte, 2048)
	for start := time.Now(); ; {
		if _, err := client.WriteToUDPAddrPort(msg, group); err != nil {
			t.Fatal(err)
		}
		client.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, src, err := client.ReadFromUDPAddrPort(buf)
		if err == nil {
			h, payload, _, err := pva.SplitMessage(buf[:n])
			var m pva.SearchResponse
			if err != nil || m.Decode(payload, h.BigEndian()) != nil || !m.Found || m.GUID != srvX.GUID {
				t.Fatalf("answer %+v %v", m, err)
			}
			if src.Addr() != netip.MustParseAddr("10.78.0.1") {
				t.Errorf("answered from %s, want pvans's address on the link", src)
			}
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no answer to a search sent to the group (stats %+v)", metrics.Sprint(&s.st))
		}
	}
}
