//go:build linux

package udpsearch

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/testutil"
)

// A two-legged host serving its IOC leg (LearnFrom 10.201.1.1) takes
// beacons, discovery replies and search replies, on the search port and on
// the client socket, only from that leg, or from a local process that sent
// to that leg's address; the client leg's, whatever address they were sent
// to, and a local process's sent to loopback or the client leg, are
// dropped and counted. A policy without LearnFrom takes them all again.
func TestHintsOnlyFromServedInterface(t *testing.T) {
	host, ioc, cli := newNetns(t), newNetns(t), newNetns(t)
	veth(t, host, "10.201.1.1/24", ioc, "10.201.1.2/24")
	veth(t, host, "10.201.2.1/24", cli, "10.201.2.2/24")
	cli.IP(t, "route add 10.201.1.0/24 via 10.201.2.1")
	served, other := netip.MustParseAddr("10.201.1.1"), netip.MustParseAddr("10.201.2.1")
	iocSrv, cliSrv := netip.MustParseAddrPort("10.201.1.2:5076"), netip.MustParseAddrPort("10.201.2.2:5076")

	sink := &obsSink{}
	var mu sync.Mutex
	var hits []pva.GUID
	learn := Policy{LearnFrom: []netip.Addr{served}}
	s := startServer(t, host, Options{GUID: ownGUID, TCPPort: 5075, Beacons: sink, InterfaceRefresh: -1,
		Interfaces: learn.LearnFrom, LearnFrom: learn.LearnFrom, AddrList: Unicast(iocSrv, cliSrv),
		OnSearchResponse: func(_ netip.AddrPort, m *pva.SearchResponse) {
			mu.Lock()
			hits = append(hits, m.GUID)
			mu.Unlock()
		}})
	client := s.ClientAddr().Port()
	fromIOC, fromCli := udpIn(t, ioc, iocSrv.String()), udpIn(t, cli, cliSrv.String())
	local := udpIn(t, host, "0.0.0.0:0")

	guid := func(i byte) pva.GUID { return pva.GUID{0x1E, i} }
	bcn := func(i byte) []byte {
		return pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer, &pva.Beacon{GUID: guid(i), Addr: pva.AnyIPv4, Port: 5075, Protocol: "tcp"})
	}
	pong := func(i byte) []byte {
		return appendResponse(nil, guid(i), pva.SearchSeqFind, pva.AnyIPv4, 5075, "tcp", nil)
	}
	hit := func(i byte) []byte { return appendResponse(nil, guid(i), 7, pva.AnyIPv4, 5075, "tcp", []uint32{1}) }
	send := func(c *net.UDPConn, b []byte, to netip.Addr, port uint16) {
		t.Helper()
		if _, err := c.WriteToUDPAddrPort(b, netip.AddrPortFrom(to, port)); err != nil {
			t.Fatal(err)
		}
	}
	lo := netip.MustParseAddr("127.0.0.1")
	round := func() {
		send(fromIOC, bcn(1), served, 5076)    // taken
		send(fromCli, bcn(2), other, 5076)     // client leg
		send(fromCli, bcn(3), served, 5076)    // client leg, to the served address
		send(local, bcn(4), served, 5076)      // local, to the served address: taken
		send(local, bcn(5), lo, 5076)          // local, to loopback
		send(local, bcn(6), other, 5076)       // local, to the client leg
		send(fromIOC, pong(7), served, client) // taken
		send(fromCli, pong(8), other, client)
		send(fromIOC, hit(9), served, client) // taken
		send(fromCli, hit(10), other, client)
	}
	observed := func() []pva.GUID {
		var g []pva.GUID
		for _, o := range sink.all() {
			if !slices.Contains(g, o.GUID) {
				g = append(g, o.GUID)
			}
		}
		slices.SortFunc(g, func(a, b pva.GUID) int { return slices.Compare(a[:], b[:]) })
		return g
	}
	hitGUIDs := func() []pva.GUID {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(hits)
	}

	round()
	testutil.WaitFor(t, 5*time.Second, "the datagrams to be handled", func() bool {
		return s.Stats().HintInterface >= 6 && len(observed()) >= 3 && len(hitGUIDs()) >= 1
	})
	time.Sleep(100 * time.Millisecond) // anything else in flight
	if g := observed(); !slices.Equal(g, []pva.GUID{guid(1), guid(4), guid(7)}) {
		t.Errorf("servers observed %v, want only the IOC leg's beacon and pong and the local one sent to the IOC-leg address", g)
	}
	if g := hitGUIDs(); !slices.Equal(g, []pva.GUID{guid(9)}) {
		t.Errorf("search replies handed on %v, want only the IOC leg's", g)
	}
	if st := s.Stats(); st.HintInterface != 6 {
		t.Errorf("HintInterface = %d, want 6 (stats %+v)", st.HintInterface, st)
	}

	// Without LearnFrom (udp.learn_interfaces: all) every leg is taken.
	s.SetPolicy(Policy{})
	round()
	testutil.WaitFor(t, 5*time.Second, "every hint taken", func() bool {
		return len(observed()) == 8 && len(hitGUIDs()) == 3
	})
	if st := s.Stats(); st.HintInterface != 6 {
		t.Errorf("HintInterface = %d after the wider policy, want still 6", st.HintInterface)
	}
}
