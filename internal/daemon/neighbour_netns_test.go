//go:build linux

package daemon

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/testutil"
)

var nsSeq atomic.Int32

// sharedUDP opens a UDP socket bound to addr inside ns with the socket
// options every EPICS server uses on the search port (SO_REUSEADDR and
// SO_REUSEPORT), optionally joined to the loopback group and sending
// multicast through 127.0.0.1.
func sharedUDP(t *testing.T, ns *testutil.Netns, addr string, join bool) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := ns.Do(func() error {
		lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				f := int(fd)
				for _, o := range []int{unix.SO_REUSEADDR, unix.SO_REUSEPORT} {
					if serr == nil {
						serr = unix.SetsockoptInt(f, unix.SOL_SOCKET, o, 1)
					}
				}
				if serr == nil {
					serr = unix.SetsockoptInet4Addr(f, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, [4]byte{127, 0, 0, 1})
				}
				if serr == nil && join {
					serr = unix.SetsockoptIPMreq(f, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP,
						&unix.IPMreq{Multiaddr: [4]byte{224, 0, 0, 128}, Interface: [4]byte{127, 0, 0, 1}})
				}
			})
			if err != nil {
				return err
			}
			return serr
		}}
		pc, err := lc.ListenPacket(context.Background(), "udp4", addr)
		if err == nil {
			c = pc.(*net.UDPConn)
		}
		return err
	})
	if err != nil {
		t.Fatalf("UDP %s: %v", addr, err)
	}
	return c
}

// A pvAccessCPP server on the host bound to 127.0.0.1, with real sockets in
// a namespace made by the test: two PVXS-like servers and a
// pvAccessCPP-like server share UDP 5076 with pvans; the pvAccessCPP one
// binds 127.0.0.1:5076, so every unicast datagram to 127.0.0.1:5076 (the
// PVXS servers' beacons, pvans's discovery pings and search-through
// searches) reaches only it, and it forwards a search to the others only
// when the search carries the Unicast flag. pvans must still learn every
// server by discovery and resolve the name of the one that cannot be listed
// by search-through.
//
// The servers' TCP listeners are on the host's loopback: the daemon's
// prober dials from goroutines outside the namespace, and 127.0.0.1 is the
// address the servers' UDP answers name in either namespace. Only the UDP
// search port, where the situation lives, needs the namespace.
func TestPVAccessCPPNeighbour(t *testing.T) {
	testutil.RequireNetns(t, "pvAccessCPP neighbour test")
	ns := testutil.NewNetns(t, fmt.Sprintf("pvans-d%d-%d", os.Getpid(), nsSeq.Add(1)))
	const port = 5076
	group := netip.AddrPortFrom(netip.MustParseAddr("224.0.0.128"), port)
	loDest := netip.AddrPortFrom(lo, port)

	// pvans first (as on a host where it starts before the IOCs), then the
	// pvAccessCPP server, whose 127.0.0.1 socket outranks every wildcard one.
	c := config.Loopback(testutil.FreeTCPPort(t), port)
	c.HTTP.Listen = ""
	c.Search.Through = true
	c.Search.DiscoveryAtStart = false // sent by hand once every server is up
	d, err := New(&c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Do(d.Start); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)

	cppSrv := startPeerServer(t, true, "cpp:c:mbox")
	cpp := newCPPNeighbour(t, sharedUDP(t, ns, "127.0.0.1:5076", false), sharedUDP(t, ns, "224.0.0.128:5076", true), group, cppSrv)

	listed := startPeerServer(t, true, "pvxs:a:mbox1", "pvxs:a:mbox2")
	searchOnly := startPeerServer(t, false, "pvxs:b:mbox3")
	var pvxs []*peerUDP
	for _, s := range []*peerServer{listed, searchOnly} {
		u := newPeerUDP(t, sharedUDP(t, ns, "0.0.0.0:5076", true))
		u.add(s)
		u.start()
		pvxs = append(pvxs, u)
		// PVXS servers beacon to 127.0.0.1 here: the pvAccessCPP socket
		// takes those, so pvans never hears them.
		if err := s.beacon(u.conn, loDest, 0); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 5*time.Second, "pvAccessCPP socket took both beacons", func() bool { return cpp.beacons.Load() == 2 })

	if err := d.Discover(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "listable servers listed through discovery", func() bool {
		for _, n := range []string{"pvxs:a:mbox1", "pvxs:a:mbox2", "cpp:c:mbox"} {
			if _, ok := d.Registry.LookupName(n); !ok {
				return false
			}
		}
		return true
	})
	if _, ok := d.Registry.Server(searchOnly.GUID()); !ok {
		t.Fatal("the server that cannot be listed was not learned through discovery")
	}

	var cl *nsclient.Client
	if err := ns.Do(func() (err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cl, err = nsclient.Dial(ctx, d.tcpAddr())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	want := map[string]netip.AddrPort{
		"pvxs:a:mbox1": listed.Endpoint(), "pvxs:a:mbox2": listed.Endpoint(),
		"pvxs:b:mbox3": searchOnly.Endpoint(), "cpp:c:mbox": cppSrv.Endpoint(),
	}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	if err := cl.Search(names); err != nil {
		t.Fatal(err)
	}
	for _, a := range waitAnswers(t, cl, 10*time.Second) {
		if a.Endpoint != want[a.Name] {
			t.Errorf("%s answered %v, want %v", a.Name, a.Endpoint, want[a.Name])
		}
	}
	st := struct{ Beacons, DiscoveryPongs, Searches, DropTagForeign, DropMalformed uint64 }{
		count(t, d, `pvans_beacons_total{via="beacon"}`), count(t, d, `pvans_beacons_total{via="discovery"}`),
		count(t, d, "pvans_udp_searches_total"), count(t, d, `pvans_udp_drops_total{reason="tag_foreign"}`),
		count(t, d, `pvans_udp_drops_total{reason="malformed"}`)}
	t.Logf("pvAccessCPP neighbour forwarded %d, took %d beacons, answered %d unflagged unicasts; pvans heard %d beacons, %d discovery replies",
		cpp.forwarded.Load(), cpp.beacons.Load(), cpp.unflagged.Load(), st.Beacons, st.DiscoveryPongs)
	if st.Searches == 0 || st.DropTagForeign != 0 || st.DropMalformed != 0 {
		t.Errorf("pvans did not take the neighbour's forwarded format: %d searches, %d foreign tags, %d malformed",
			st.Searches, st.DropTagForeign, st.DropMalformed)
	}
	if st.Beacons != 0 {
		t.Errorf("pvans heard %d beacons: the situation was not reproduced", st.Beacons)
	}
	if cpp.unflagged.Load() != 0 {
		t.Errorf("%d searches from pvans reached the pvAccessCPP server without the Unicast flag", cpp.unflagged.Load())
	}
	for i, u := range pvxs {
		if u.searches.Load() == 0 {
			t.Errorf("PVXS server %d saw no search", i)
		}
	}
}
