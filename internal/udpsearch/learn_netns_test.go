//go:build linux

package udpsearch

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/testutil"
)

// The two-legged host: the IOC leg 10.201.1.1 (served) to ioc's
// 10.201.1.2, the client leg 10.201.2.1 to cli's 10.201.2.2, which routes
// the IOC net through the host.
var (
	served, other  = netip.MustParseAddr("10.201.1.1"), netip.MustParseAddr("10.201.2.1")
	iocSrv, cliSrv = netip.MustParseAddrPort("10.201.1.2:5076"), netip.MustParseAddrPort("10.201.2.2:5076")
)

// legs is a server on the two-legged host taking hints from the IOC leg,
// with senders on each leg and on the host itself.
type legs struct {
	s                       *Server
	sink                    *obsSink
	fromIOC, fromCli, local *net.UDPConn
	mu                      sync.Mutex
	hits                    []pva.GUID // handed to OnSearchResponse
}

func newLegs(t *testing.T, o Options) *legs {
	t.Helper()
	host, ioc, cli := newNetns(t), newNetns(t), newNetns(t)
	veth(t, host, served.String()+"/24", ioc, iocSrv.Addr().String()+"/24")
	veth(t, host, other.String()+"/24", cli, cliSrv.Addr().String()+"/24")
	cli.IP(t, "route add 10.201.1.0/24 via "+other.String())
	l := &legs{sink: &obsSink{}}
	o.GUID, o.TCPPort, o.Beacons, o.InterfaceRefresh = ownGUID, 5075, l.sink, -1
	o.Interfaces, o.LearnFrom = []netip.Addr{served}, []netip.Addr{served}
	o.OnSearchResponse = func(_ netip.AddrPort, m *pva.SearchResponse) {
		l.mu.Lock()
		l.hits = append(l.hits, m.GUID)
		l.mu.Unlock()
	}
	l.s = startServer(t, host, o)
	l.fromIOC, l.fromCli = udpIn(t, ioc, iocSrv.String()), udpIn(t, cli, cliSrv.String())
	l.local = udpIn(t, host, "0.0.0.0:0")
	return l
}

func (l *legs) send(t *testing.T, c *net.UDPConn, b []byte, to netip.Addr, port uint16) {
	t.Helper()
	if _, err := c.WriteToUDPAddrPort(b, netip.AddrPortFrom(to, port)); err != nil {
		t.Fatal(err)
	}
}

// observed is the GUIDs handed to the tracker, each once, sorted.
func (l *legs) observed() []pva.GUID {
	var g []pva.GUID
	for _, o := range l.sink.all() {
		if !slices.Contains(g, o.GUID) {
			g = append(g, o.GUID)
		}
	}
	slices.SortFunc(g, func(a, b pva.GUID) int { return slices.Compare(a[:], b[:]) })
	return g
}

func (l *legs) hitGUIDs() []pva.GUID {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.hits)
}

func legGUID(i byte) pva.GUID { return pva.GUID{0x1E, i} }

func legBeacon(i byte) []byte {
	return pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer,
		&pva.Beacon{GUID: legGUID(i), Addr: pva.AnyIPv4, Port: 5075, Protocol: "tcp"})
}

func legPong(i byte) []byte {
	return appendResponse(nil, legGUID(i), pva.SearchSeqFind, pva.AnyIPv4, 5075, "tcp", nil)
}

func legHit(i byte, port uint16) []byte {
	return appendResponse(nil, legGUID(i), 7, pva.AnyIPv4, port, "tcp", []uint32{1})
}

// A two-legged host serving its IOC leg (LearnFrom 10.201.1.1) takes
// beacons, discovery replies and search replies, on the search port and on
// the client socket, only from that leg, or from a local process that sent
// to that leg's address; the client leg's, whatever address they were sent
// to, and a local process's sent to loopback or the client leg, are
// dropped and counted. A policy without LearnFrom takes them all again.
func TestHintsOnlyFromServedInterface(t *testing.T) {
	l := newLegs(t, Options{AddrList: Unicast(iocSrv, cliSrv)})
	s, client := l.s, l.s.ClientAddr().Port()
	lo := netip.MustParseAddr("127.0.0.1")
	round := func() {
		l.send(t, l.fromIOC, legBeacon(1), served, 5076) // taken
		l.send(t, l.fromCli, legBeacon(2), other, 5076)  // client leg
		l.send(t, l.fromCli, legBeacon(3), served, 5076) // client leg, to the served address
		l.send(t, l.local, legBeacon(4), served, 5076)   // local, to the served address: taken
		l.send(t, l.local, legBeacon(5), lo, 5076)       // local, to loopback
		l.send(t, l.local, legBeacon(6), other, 5076)    // local, to the client leg
		l.send(t, l.fromIOC, legPong(7), served, client) // taken
		l.send(t, l.fromCli, legPong(8), other, client)
		l.send(t, l.fromIOC, legHit(9, 5075), served, client) // taken
		l.send(t, l.fromCli, legHit(10, 5075), other, client)
	}

	round()
	testutil.WaitFor(t, 5*time.Second, "the datagrams to be handled", func() bool {
		return s.st.hintInterface.Load() >= 6 && len(l.observed()) >= 3 && len(l.hitGUIDs()) >= 1
	})
	time.Sleep(100 * time.Millisecond) // anything else in flight
	if g := l.observed(); !slices.Equal(g, []pva.GUID{legGUID(1), legGUID(4), legGUID(7)}) {
		t.Errorf("servers observed %v, want only the IOC leg's beacon and pong and the local one sent to the IOC-leg address", g)
	}
	if g := l.hitGUIDs(); !slices.Equal(g, []pva.GUID{legGUID(9)}) {
		t.Errorf("search replies handed on %v, want only the IOC leg's", g)
	}
	if s.st.hintInterface.Load() != 6 {
		t.Errorf("HintInterface = %d, want 6 (stats %+v)", s.st.hintInterface.Load(), metrics.Sprint(&s.st))
	}

	// Without LearnFrom (udp.learn_interfaces: all) every leg is taken.
	s.Apply(Policy{})
	round()
	testutil.WaitFor(t, 5*time.Second, "every hint taken", func() bool {
		return len(l.observed()) == 8 && len(l.hitGUIDs()) == 3
	})
	if s.st.hintInterface.Load() != 6 {
		t.Errorf("HintInterface = %d after the wider policy, want still 6", s.st.hintInterface.Load())
	}
}

// Answers to what pvans asked a known server over TCP pass wherever the
// server is: a ping answer the prober takes (OnPingAnswer), and a direct
// ask's answer over UDP (Expect) naming the server asked. A discovery
// answer the prober does not take, and a search reply from a client-leg
// host pvans searched but did not ask, are dropped for their interface;
// the asked host's reply naming another port is unsolicited.
func TestAnswersToOwnQuestionsFromAnyInterface(t *testing.T) {
	var mu sync.Mutex
	var pings []pva.GUID
	l := newLegs(t, Options{AddrList: Unicast(cliSrv), OnPingAnswer: func(_ netip.AddrPort, m *pva.SearchResponse) bool {
		if m.GUID != legGUID(20) {
			return false
		}
		mu.Lock()
		pings = append(pings, m.GUID)
		mu.Unlock()
		return true
	}})
	client := l.s.ClientAddr().Port()
	l.send(t, l.fromCli, legPong(20), other, client)      // the prober's ping answer
	l.send(t, l.fromCli, legPong(21), other, client)      // not the prober's: interface
	l.send(t, l.fromCli, legHit(22, 5075), other, client) // searched, not asked: interface
	testutil.WaitFor(t, 5*time.Second, "the first answers to be handled", func() bool {
		return l.s.st.searchReplies.Load() >= 3
	})
	l.s.Expect(netip.AddrPortFrom(cliSrv.Addr(), 5075), time.Minute)
	l.send(t, l.fromCli, legHit(23, 5075), other, client) // asked, names the port asked
	l.send(t, l.fromCli, legHit(24, 5085), other, client) // asked, another port: unsolicited
	testutil.WaitFor(t, 5*time.Second, "the answers to be handled", func() bool {
		return l.s.st.searchReplies.Load() >= 5
	})
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(pings, []pva.GUID{legGUID(20)}) {
		t.Errorf("ping answers taken %v", pings)
	}
	if g := l.hitGUIDs(); !slices.Equal(g, []pva.GUID{legGUID(23)}) {
		t.Errorf("search replies handed on %v, want only the asked server's", g)
	}
	if g := l.observed(); len(g) != 0 {
		t.Errorf("servers observed %v", g)
	}
	if l.s.st.hintInterface.Load() != 2 || l.s.st.hintUnsolicited.Load() != 1 {
		t.Errorf("HintInterface %d, HintUnsolicited %d; want 2 and 1", l.s.st.hintInterface.Load(), l.s.st.hintUnsolicited.Load())
	}
}
