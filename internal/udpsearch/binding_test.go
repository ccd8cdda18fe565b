//go:build linux

package udpsearch

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvans-project/pvans/internal/pva"
)

// What docs/configuration.md says of pva.interfaces on UDP: the search
// port is one socket bound to the wildcard address (as in PVXS), and the
// list decides which arrivals are answered, by the local address a search
// reached (the address of its arrival interface). A search arriving
// elsewhere is still forwarded to the other local servers, just not
// answered.
func TestUDPBindsWildcardAndFiltersByArrival(t *testing.T) {
	ns, peer := newNetns(t), newNetns(t)
	veth(t, ns, "10.77.0.1/24", peer, "10.77.0.2/24")
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, Port: 5076,
		Interfaces: []netip.Addr{netip.MustParseAddr("10.77.0.1")}})
	if a := s.LocalAddr().Addr(); !a.IsUnspecified() {
		t.Fatalf("search port bound to %v, want the wildcard", a)
	}
	port := func(c *net.UDPConn) uint16 { return c.LocalAddr().(*net.UDPAddr).AddrPort().Port() }

	// A broadcast on the listed interface: answered, from its address.
	remote := udpIn(t, peer, "10.77.0.2:0")
	setSockInt(t, remote, unix.SOL_SOCKET, unix.SO_BROADCAST, 1)
	ping := searchMsg(pva.SearchMustReply, netip.Addr{}, port(remote), nil)
	var got []rxMsg
	for start := time.Now(); len(got) == 0 && time.Since(start) < 10*time.Second; {
		// A fresh veth may drop the first datagrams.
		if _, err := remote.WriteToUDPAddrPort(ping, netip.MustParseAddrPort("10.77.0.255:5076")); err != nil {
			t.Fatal(err)
		}
		got = collect(remote, 300*time.Millisecond, 1)
	}
	if len(got) == 0 || got[0].from.Addr() != netip.MustParseAddr("10.77.0.1") {
		t.Fatalf("broadcast on the listed interface: replies %+v, want one from 10.77.0.1", got)
	}

	// A unicast to 127.0.0.1 arrives on loopback, not listed: forwarded
	// to the loopback group (for the other server sharing the port), not
	// answered.
	var obs *net.UDPConn
	if err := ns.Do(func() (err error) { obs, err = listenSearchPortAt(ForwardGroup, 5076); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obs.Close() })
	fwd, notOurs := s.st.forwards.Load(), s.st.dropNotOurInterface.Load()
	local := udpIn(t, ns, "127.0.0.1:0")
	if _, err := local.WriteToUDPAddrPort(searchMsg(pva.SearchMustReply|pva.SearchUnicast, netip.Addr{}, port(local), nil),
		netip.MustParseAddrPort("127.0.0.1:5076")); err != nil {
		t.Fatal(err)
	}
	if got := collect(local, 500*time.Millisecond, 0); len(got) != 0 {
		t.Fatalf("answered a search that arrived on an unlisted interface: %+v", got)
	}
	if got := collect(obs, 300*time.Millisecond, 0); len(got) != 1 {
		t.Fatalf("the other server on the port got %d forwards, want 1", len(got))
	}
	if s.st.forwards.Load() != fwd+1 || s.st.dropNotOurInterface.Load() != notOurs+1 {
		t.Fatalf("forwards %d→%d, not-our-interface drops %d→%d: want one each",
			fwd, s.st.forwards.Load(), notOurs, s.st.dropNotOurInterface.Load())
	}
}
