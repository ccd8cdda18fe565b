//go:build linux

// Package ipv6 holds the IPv6 reach test: pvans, simulated servers and a
// client on IPv6-only links. It has no non-test code. Everything runs in
// network namespaces the test makes (ULA addresses that exist only there).
package ipv6

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

// The topology: IPv6 only on every link (lo keeps 127.0.0.1 for the API).
//
//	server fd00:18:1::2, ::3 ── fd00:18:1::1  pvans  fd00:18:2::1 ── fd00:18:2::2 client
var (
	pvansServerSide = netip.MustParseAddr("fd00:18:1::1")
	serverAddr      = netip.MustParseAddr("fd00:18:1::2")
	throughAddr     = netip.MustParseAddr("fd00:18:1::3") // a server that does not beacon
	pvansClientSide = netip.MustParseAddr("fd00:18:2::1")
	clientAddr      = netip.MustParseAddr("fd00:18:2::2")
)

var seq atomic.Int32

type topo struct{ pvans, server, client *testutil.Netns }

func newTopo(t *testing.T) *topo {
	t.Helper()
	testutil.RequireNetns(t, "IPv6 tests")
	if testing.Short() {
		t.Skip("builds and runs pvans in namespaces")
	}
	id := fmt.Sprintf("%d-%d", os.Getpid(), seq.Add(1))
	tp := &topo{
		pvans:  testutil.NewNetns(t, "pvans-v6-p-"+id),
		server: testutil.NewNetns(t, "pvans-v6-s-"+id),
		client: testutil.NewNetns(t, "pvans-v6-c-"+id),
	}
	i := seq.Add(1)
	// nodad: the addresses are usable at once (no duplicate detection wait).
	testutil.Veth(t, tp.pvans, fmt.Sprintf("v6ps%d", i), []string{pvansServerSide.String() + "/64 nodad"},
		tp.server, fmt.Sprintf("v6sp%d", i), []string{serverAddr.String() + "/64 nodad", throughAddr.String() + "/64 nodad"})
	testutil.Veth(t, tp.pvans, fmt.Sprintf("v6pc%d", i), []string{pvansClientSide.String() + "/64 nodad"},
		tp.client, fmt.Sprintf("v6cp%d", i), []string{clientAddr.String() + "/64 nodad"})
	testutil.Run(t, "ip", "netns", "exec", tp.pvans.Name, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	tp.server.IP(t, "-6 route add default via "+pvansServerSide.String())
	tp.client.IP(t, "-6 route add default via "+pvansClientSide.String())
	return tp
}

func startSim(t *testing.T, n *testutil.Netns, o sim.Options) *sim.Site {
	t.Helper()
	var site *sim.Site
	if err := n.Do(func() (err error) { site, err = sim.Start(context.Background(), o); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	return site
}

// On IPv6-only links a simulated server is learned from its IPv6 beacon
// and probed over IPv6; a TCP search and a UDP search from an IPv6 client
// are answered with the server's IPv6 endpoint (16-byte address), the UDP
// answer coming from the address the client searched; a discovery ping
// over IPv6 is answered; a name no beacon taught is found by search-through
// to an IPv6 destination; and the client reaches the server at the
// endpoint it was told.
func TestIPv6Only(t *testing.T) {
	tp := newTopo(t)
	site := startSim(t, tp.server, sim.Options{Host: serverAddr, TCPPort: 5075, Names: [][]string{{"v6:temp", "v6:press"}},
		BeaconDests: []netip.AddrPort{netip.AddrPortFrom(pvansServerSide, 5076)}, BeaconInterval: 300 * time.Millisecond})
	hidden := startSim(t, tp.server, sim.Options{Host: throughAddr, TCPPort: 5075, UDPPort: 5076, Names: [][]string{{"v6:through"}}})
	p := harness.Start(t, harness.Options{Netns: tp.pvans,
		Args: []string{"--addr-list", "[" + throughAddr.String() + "]:5076", "--search-through"}})

	want := netip.AddrPortFrom(serverAddr, 5075)
	guid := site.Server(0).GUID
	testutil.WaitFor(t, 30*time.Second, "pvans learns the IPv6 server", func() bool {
		ok, _ := p.HasName("v6:temp")
		return ok
	})
	code, b, err := p.Get("/v1/names/v6:temp")
	var n httpapi.Name
	if err != nil || code != 200 || json.Unmarshal(b, &n) != nil || n.Endpoint != want.String() || n.How != "probe" {
		t.Fatalf("/v1/names/v6:temp: %d %v %s", code, err, b)
	}

	// TCP search from the IPv6 client.
	got, err := harness.Query(tp.client, netip.AddrPortFrom(pvansClientSide, 5075), []string{"v6:temp", "v6:press"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"v6:temp", "v6:press"} {
		if a := got[name]; a.Endpoint != want || a.GUID != guid {
			t.Errorf("TCP: %s answered %s %s, want %s %s", name, a.Endpoint, a.GUID, want, guid)
		}
	}

	// UDP search from the IPv6 client.
	searchPort := netip.AddrPortFrom(pvansClientSide, 5076)
	ans, err := harness.UDPSearch(tp.client, searchPort, []string{"v6:press"}, 10*time.Second)
	if err != nil || len(ans) == 0 {
		t.Fatalf("UDP: no answer (%v)", err)
	}
	if a := ans[0]; !a.Found || a.Endpoint != want || a.GUID != guid || a.From != searchPort {
		t.Errorf("UDP answer %+v, want %s from %s", a, want, searchPort)
	}

	// Discovery ping over IPv6: answered with pvans's own identity.
	pong, err := harness.UDPSearch(tp.client, searchPort, nil, 3*time.Second)
	if err != nil || len(pong) == 0 || pong[0].Found || pong[0].GUID == guid {
		t.Errorf("discovery ping over IPv6: %+v %v", pong, err)
	}

	// Search-through to an IPv6 destination, answered to the client.
	got, err = harness.Query(tp.client, netip.AddrPortFrom(pvansClientSide, 5075), []string{"v6:through"}, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := got["v6:through"]; !ok || a.Endpoint != netip.AddrPortFrom(throughAddr, 5075) || a.GUID != hidden.Server(0).GUID {
		t.Errorf("search-through over IPv6: %+v", got)
	}

	// The client reaches the server at the endpoint it was told.
	direct, err := harness.Query(tp.client, want, []string{"v6:temp"}, 5*time.Second)
	if err != nil || direct["v6:temp"].GUID != guid {
		t.Errorf("connecting to %s from the client: %v %+v", want, err, direct)
	}
}
