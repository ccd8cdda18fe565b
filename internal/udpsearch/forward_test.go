//go:build linux

package udpsearch

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
)

// sock_diag counts the sockets bound to a port, ours excluded by inode,
// and nothing else.
func TestOtherSocketsOnPort(t *testing.T) {
	ns := newNetns(t)
	var a *net.UDPConn
	if err := ns.Do(func() (err error) { a, err = listenSearchPort(0, 0); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	p := a.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	own, err := socketInode(a)
	if err != nil {
		t.Fatal(err)
	}
	var diag *sockDiag
	if err := ns.Do(func() (err error) { diag, err = openSockDiag(); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { diag.close() })
	count := func(own []uint64) int {
		t.Helper()
		n, err := diag.otherSocketsOnPort(p, own) // on any thread: the socket is in ns
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(nil); n != 1 {
		t.Fatalf("sockets on %d: %d, want 1", p, n)
	}
	if n := count([]uint64{own}); n != 0 {
		t.Fatalf("others on %d: %d, want 0", p, n)
	}
	udpIn(t, ns, "127.0.0.1:0") // another port: not counted
	var g *net.UDPConn
	if err := ns.Do(func() (err error) { g, err = listenSearchPortAt(ForwardGroup, p); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if n := count([]uint64{own}); n != 1 {
		t.Fatalf("others on %d: %d, want 1", p, n)
	}
}

// pvans alone on the search port answers unicast searches without
// forwarding them; once a second socket joins the group on the port, it
// receives every unicast search pvans gets, within the check interval.
// pvans handles each search once: its own copies come back and are
// dropped unread.
func TestSecondSocketStartsReceivingForwards(t *testing.T) {
	ns := newNetns(t)
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true,
		Resolver: newMapResolver(map[string]resolver.Endpoint{"pvans:held": srvX})})
	client := udpIn(t, ns, "127.0.0.1:0")
	cport := client.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	msg := searchMsg(pva.SearchUnicast, netip.Addr{}, cport, []string{"tcp"}, "pvans:held")
	lo5076 := netip.MustParseAddrPort("127.0.0.1:5076")
	search := func() int {
		t.Helper()
		if _, err := client.WriteToUDPAddrPort(msg, lo5076); err != nil {
			t.Fatal(err)
		}
		return len(collect(client, 100*time.Millisecond, 0))
	}
	if n := search(); n != 1 {
		t.Fatalf("alone: %d answers", n)
	}
	if s.st.forwardsSkipped.Load() != 1 || s.st.forwards.Load() != 0 || s.st.portPeers.Load() != 0 {
		t.Fatalf("alone: %+v", metrics.Sprint(&s.st.fwdCounters))
	}

	var obs *net.UDPConn
	if err := ns.Do(func() (err error) { obs, err = listenSearchPortAt(ForwardGroup, 5076); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obs.Close() })
	sent := 1
	deadline := time.Now().Add(10 * time.Second) // the check interval is 1 s
	for {
		sent++
		if n := search(); n != 1 {
			t.Fatalf("search %d: %d answers", sent, n)
		}
		if got := collect(obs, 100*time.Millisecond, 0); len(got) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new socket got no forward in 10 s: %+v", metrics.Sprint(&s.st.fwdCounters))
		}
	}
	for i := range 5 {
		sent++
		if n := search(); n != 1 {
			t.Fatalf("search %d: %d answers", sent, n)
		}
		if got := collect(obs, 100*time.Millisecond, 0); len(got) != 1 || got[0].b[3] != byte(pva.CmdOriginTag) {
			t.Fatalf("search %d after the peer was seen: observer got %d datagrams", i, len(got))
		}
	}
	if s.st.searches.Load() != uint64(sent) || s.st.responses.Load() != uint64(sent) || s.st.ownCopies.Load() != s.st.forwards.Load() || s.st.forwards.Load() < 6 || s.st.portPeers.Load() != 1 {
		t.Fatalf("%d searches: %+v", sent, metrics.Sprint(&s.st))
	}
}

// A beacon from a local address makes pvans count the sockets on the port
// again before its next forward decision, however fresh the count.
func TestLocalBeaconRechecksThePort(t *testing.T) {
	ns := newNetns(t)
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true, PortPeerCheck: time.Hour,
		Resolver: newMapResolver(map[string]resolver.Endpoint{"pvans:held": srvX})})
	client := udpIn(t, ns, "127.0.0.1:0")
	cport := client.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	msg := searchMsg(pva.SearchUnicast, netip.Addr{}, cport, []string{"tcp"}, "pvans:held")
	lo5076 := netip.MustParseAddrPort("127.0.0.1:5076")
	var obs *net.UDPConn
	forwarded := func() int {
		t.Helper()
		if _, err := client.WriteToUDPAddrPort(msg, lo5076); err != nil {
			t.Fatal(err)
		}
		if n := len(collect(client, 100*time.Millisecond, 0)); n != 1 {
			t.Fatalf("%d answers", n)
		}
		if obs == nil {
			return 0
		}
		return len(collect(obs, 100*time.Millisecond, 0))
	}
	forwarded() // counted: alone
	if err := ns.Do(func() (err error) { obs, err = listenSearchPortAt(ForwardGroup, 5076); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obs.Close() })
	if n := forwarded(); n != 0 {
		t.Fatalf("forwarded before the count was stale (%d): the test cannot tell what the beacon did", n)
	}
	b := pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer, &pva.Beacon{GUID: guidA, Addr: pva.AnyIPv4, Port: 5075, Protocol: "tcp"})
	if _, err := client.WriteToUDPAddrPort(b, lo5076); err != nil {
		t.Fatal(err)
	}
	if n := forwarded(); n != 1 {
		t.Fatalf("after a local beacon: the new socket got %d forwards, want 1 (%+v)", n, metrics.Sprint(&s.st.fwdCounters))
	}
}

// pvans's own IPv6 search port socket shares the port number but is no
// peer: alone with it, a unicast search is not forwarded.
func TestOwnIPv6SocketIsNoPortPeer(t *testing.T) {
	ns := newNetns(t)
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true, IPv6: true,
		Resolver: newMapResolver(map[string]resolver.Endpoint{"pvans:held": srvX})})
	if s.fam[ip6].search == nil {
		t.Skip("no IPv6 in the namespace")
	}
	client := udpIn(t, ns, "127.0.0.1:0")
	cport := client.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	msg := searchMsg(pva.SearchUnicast, netip.Addr{}, cport, []string{"tcp"}, "pvans:held")
	if _, err := client.WriteToUDPAddrPort(msg, netip.MustParseAddrPort("127.0.0.1:5076")); err != nil {
		t.Fatal(err)
	}
	if n := len(collect(client, 200*time.Millisecond, 0)); n != 1 {
		t.Fatalf("%d answers", n)
	}
	if s.st.forwardsSkipped.Load() != 1 || s.st.forwards.Load() != 0 || s.st.portPeers.Load() != 0 {
		t.Fatalf("%+v", metrics.Sprint(&s.st.fwdCounters))
	}
}

// A client pvans refuses is refused on the host's other servers too: a
// unicast search from a denied client, from an ignored address or over the
// client's search rate is dropped before pvans forwards it, so no other
// socket on the port sees it. An allowed client's search within its rate
// reaches the other socket, so the observer would have seen the others.
func TestRefusedSearchIsNotForwarded(t *testing.T) {
	ns := newNetns(t)
	denied := netip.MustParseAddr("127.0.0.5")
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true, PortPeerCheck: -1,
		ClientAllowed: func(a netip.Addr) bool { return a != denied },
		IgnoreAddrs:   []netip.AddrPort{netip.MustParseAddrPort("127.0.0.6:0")},
		SearchRate:    0.001, SearchBurst: 1,
		Resolver: newMapResolver(map[string]resolver.Endpoint{"pvans:held": srvX})})
	var obs *net.UDPConn
	if err := ns.Do(func() (err error) { obs, err = listenSearchPortAt(ForwardGroup, 5076); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obs.Close() })
	lo5076 := netip.MustParseAddrPort("127.0.0.1:5076")
	// search sends one unicast search from a client at from and returns
	// the answers it got and the datagrams the other socket saw.
	search := func(c *net.UDPConn) (answers, seen int) {
		t.Helper()
		cport := c.LocalAddr().(*net.UDPAddr).AddrPort().Port()
		if _, err := c.WriteToUDPAddrPort(searchMsg(pva.SearchUnicast, netip.Addr{}, cport, []string{"tcp"}, "pvans:held"), lo5076); err != nil {
			t.Fatal(err)
		}
		return len(collect(c, 200*time.Millisecond, 0)), len(collect(obs, 200*time.Millisecond, 0))
	}
	ok := udpIn(t, ns, "127.0.0.7:0")
	if a, n := search(ok); a != 1 || n != 1 {
		t.Fatalf("allowed client: %d answers, other socket saw %d datagrams; want 1 and 1", a, n)
	}
	if a, n := search(ok); a != 0 || n != 0 {
		t.Errorf("allowed client over its rate: %d answers, other socket saw %d datagrams; want none", a, n)
	}
	for _, from := range []string{"127.0.0.5:0", "127.0.0.6:0"} {
		if a, n := search(udpIn(t, ns, from)); a != 0 || n != 0 {
			t.Errorf("client %s: %d answers, other socket saw %d datagrams; want none", from, a, n)
		}
	}
	if s.st.dropDenied.Load() != 1 || s.st.dropIgnored.Load() != 1 || s.st.dropRateLimited.Load() != 1 || s.st.forwards.Load() != 1 {
		t.Errorf("denied %d, ignored %d, rate limited %d, forwards %d; want 1 each", s.st.dropDenied.Load(), s.st.dropIgnored.Load(), s.st.dropRateLimited.Load(), s.st.forwards.Load())
	}
}
