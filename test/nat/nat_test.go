//go:build linux

// Package nat holds the address-mapping test: servers in a container
// network behind a NAT host, clients inside and outside it. It has no
// non-test code. Everything runs in network namespaces the test makes;
// docs/operations.md ("NAT and containers") describes the setup it checks.
package nat

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

// The topology; these addresses exist only inside the namespaces.
//
//	server  172.31.0.5 ─┐
//	                    ├─ br0 172.31.0.1  NAT host (pvans)  10.66.0.1 ── 10.66.0.2  plant client
//	inside  172.31.0.6 ─┘
var (
	bridgeHost = netip.MustParseAddr("172.31.0.1")
	serverAddr = netip.MustParseAddr("172.31.0.5")
	insideAddr = netip.MustParseAddr("172.31.0.6")
	plantHost  = netip.MustParseAddr("10.66.0.1")
	plantAddr  = netip.MustParseAddr("10.66.0.2")
)

const mapRule = "servers=172.31.0.0/24;except_clients=172.31.0.0/24;to=10.66.0.1;ports=5075:15075,5085:15085"

const dnat = `table ip pvansnat {
	chain prerouting {
		type nat hook prerouting priority dstnat;
		ip daddr 10.66.0.1 tcp dport 15075 dnat to 172.31.0.5:5075
		ip daddr 10.66.0.1 tcp dport 15085 dnat to 172.31.0.5:5085
	}
}
`

var seq atomic.Int32

type topo struct {
	server, inside, host, plant *testutil.Netns
}

func newTopo(t *testing.T) *topo {
	t.Helper()
	testutil.RequireNetns(t, "NAT tests")
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("the NAT test needs nft (apt-get install nftables); skipping")
	}
	if testing.Short() {
		t.Skip("builds and runs pvans in namespaces")
	}
	id := fmt.Sprintf("%d-%d", os.Getpid(), seq.Add(1))
	tp := &topo{}
	for _, n := range []struct {
		p    **testutil.Netns
		kind string
	}{{&tp.server, "srv"}, {&tp.inside, "in"}, {&tp.host, "host"}, {&tp.plant, "plant"}} {
		*n.p = testutil.NewNetns(t, "pvans-nat-"+n.kind+"-"+id)
	}
	i := seq.Add(1)
	sv, sh := fmt.Sprintf("nats%d", i), fmt.Sprintf("nath%d", i)
	iv, ih := fmt.Sprintf("nati%d", i), fmt.Sprintf("natj%d", i)
	pv, ph := fmt.Sprintf("natp%d", i), fmt.Sprintf("natq%d", i)
	testutil.Veth(t, tp.server, sv, []string{serverAddr.String() + "/24"}, tp.host, sh, nil)
	testutil.Veth(t, tp.inside, iv, []string{insideAddr.String() + "/24"}, tp.host, ih, nil)
	testutil.Veth(t, tp.plant, pv, []string{plantAddr.String() + "/24"}, tp.host, ph, []string{plantHost.String() + "/24"})
	tp.host.IP(t, "link add br0 type bridge")
	tp.host.IP(t, "addr add "+bridgeHost.String()+"/24 brd + dev br0")
	tp.host.IP(t, "link set "+sh+" master br0")
	tp.host.IP(t, "link set "+ih+" master br0")
	tp.host.IP(t, "link set br0 up")
	tp.server.IP(t, "route add default via "+bridgeHost.String())
	tp.inside.IP(t, "route add default via "+bridgeHost.String())
	testutil.Run(t, "ip", "netns", "exec", tp.host.Name, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	cmd := tp.host.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(dnat)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	return tp
}

// startSim runs simulated servers in the server namespace, on
// 172.31.0.5:port, beaconing to pvans on the bridge.
func startSim(t *testing.T, n *testutil.Netns, port uint16, names []string) *sim.Site {
	t.Helper()
	var site *sim.Site
	err := n.Do(func() (err error) {
		site, err = sim.Start(context.Background(), sim.Options{Host: serverAddr, TCPPort: port, Names: [][]string{names},
			BeaconDests: []netip.AddrPort{netip.AddrPortFrom(bridgeHost, 5076)}, BeaconInterval: 300 * time.Millisecond})
		return
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	return site
}

// query asks pvans over TCP from namespace from.
func query(t *testing.T, from *testutil.Netns, pvans netip.Addr, names []string, wait time.Duration) map[string]nsclient.Answer {
	t.Helper()
	got, err := harness.Query(from, netip.AddrPortFrom(pvans, 5075), names, wait)
	if err != nil {
		t.Fatalf("query from %s: %v", from.Name, err)
	}
	return got
}

// reach connects from namespace from to the endpoint a client was told and
// asks the server there, over TCP as a PVXS client may, for name: the
// answer carries the server's GUID, so it proves which server was reached.
func reach(t *testing.T, from *testutil.Netns, ep netip.AddrPort, name string) pva.GUID {
	t.Helper()
	got, err := harness.Query(from, ep, []string{name}, 5*time.Second)
	if err != nil {
		t.Fatalf("connect from %s to %s: %v", from.Name, ep, err)
	}
	a, ok := got[name]
	if !ok {
		t.Fatalf("the server at %s (reached from %s) did not claim %s", ep, from.Name, name)
	}
	return a.GUID
}

// udpSearch sends one UDP search for name from namespace from to pvans's
// search port and returns the endpoint named in the answer.
func udpSearch(t *testing.T, from *testutil.Netns, to netip.Addr, name string) netip.AddrPort {
	t.Helper()
	var c *net.UDPConn
	if err := from.Do(func() (err error) { c, err = net.ListenUDP("udp4", &net.UDPAddr{}); return }); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := pva.NewSearchPacker(uint16(c.LocalAddr().(*net.UDPAddr).Port))
	p.Flags = pva.SearchUnicast
	var dg []byte
	if err := p.Pack([]pva.SearchName{{CID: 7, Name: []byte(name)}}, func(b []byte) { dg = append([]byte(nil), b...) }); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	for try := 0; try < 10; try++ {
		if _, err := c.WriteToUDPAddrPort(dg, netip.AddrPortFrom(to, 5076)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		n, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			continue
		}
		h, payload, _, err := pva.SplitMessage(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		var m pva.SearchResponse
		if err := m.Decode(payload, h.BigEndian()); err != nil || !m.Found {
			t.Fatalf("UDP answer %v found=%v", err, m.Found)
		}
		return netip.AddrPortFrom(m.Addr.Addr(), m.Port)
	}
	t.Fatalf("no UDP answer from %s", to)
	return netip.AddrPort{}
}

func told(t *testing.T, p *harness.Pvans, name string, client netip.Addr) string {
	t.Helper()
	code, b, err := p.Get("/v1/names/" + name + "?client=" + client.String())
	if err != nil || code != 200 {
		t.Fatalf("/v1/names?client: %d %v %s", code, err, b)
	}
	var n httpapi.Name
	if err := json.Unmarshal(b, &n); err != nil || n.Told == nil {
		t.Fatalf("/v1/names?client: %v %s", err, b)
	}
	return n.Told.Endpoint
}

// A server on the container network is learned at its bridge address. A
// client on the plant network is told the NAT host's address and the
// published port (TCP, UDP and pushed answers, the API and `pvans query`
// alike) and reaches the server through the DNAT rule; a client on the
// bridge network is told the real endpoint and reaches it directly.
func TestMappedAnswers(t *testing.T) {
	tp := newTopo(t)
	first := startSim(t, tp.server, 5075, []string{"ctr:temp", "ctr:press"})
	guid := first.Server(0).GUID
	p := harness.Start(t, harness.Options{Netns: tp.host, Args: []string{"--map-rules", mapRule}})

	learned := netip.AddrPortFrom(serverAddr, 5075)
	mapped := netip.AddrPortFrom(plantHost, 15075)
	testutil.WaitFor(t, 30*time.Second, "pvans learns the container server", func() bool {
		ok, _ := p.HasName("ctr:temp")
		return ok
	})

	// TCP answers.
	out := query(t, tp.plant, plantHost, []string{"ctr:temp", "ctr:press"}, 5*time.Second)
	for _, n := range []string{"ctr:temp", "ctr:press"} {
		if a := out[n]; a.Endpoint != mapped || a.GUID != guid {
			t.Errorf("plant client told %s for %s, want %s (guid %s)", a.Endpoint, n, mapped, guid)
		}
	}
	in := query(t, tp.inside, bridgeHost, []string{"ctr:temp"}, 5*time.Second)
	if a := in["ctr:temp"]; a.Endpoint != learned {
		t.Errorf("bridge client told %s, want the real %s", a.Endpoint, learned)
	}
	// Both reach the same server with what they were told.
	if g := reach(t, tp.plant, mapped, "ctr:temp"); g != guid {
		t.Errorf("through DNAT reached %s, want %s", g, guid)
	}
	if g := reach(t, tp.inside, learned, "ctr:temp"); g != guid {
		t.Errorf("directly reached %s, want %s", g, guid)
	}

	// UDP answers.
	if ep := udpSearch(t, tp.plant, plantHost, "ctr:press"); ep != mapped {
		t.Errorf("UDP answer to the plant client names %s, want %s", ep, mapped)
	}
	if ep := udpSearch(t, tp.inside, bridgeHost, "ctr:press"); ep != learned {
		t.Errorf("UDP answer to the bridge client names %s, want %s", ep, learned)
	}

	// The API says the same.
	if e := told(t, p, "ctr:temp", plantAddr); e != mapped.String() {
		t.Errorf("API told plant client %s", e)
	}
	if e := told(t, p, "ctr:temp", insideAddr); e != learned.String() {
		t.Errorf("API told bridge client %s", e)
	}

	// pvans query from the plant network.
	cmd := tp.plant.Command(harness.Binary(t), "query", "--server", plantHost.String()+":5075", "ctr:temp")
	cmd.Env = testutil.IsolatedEnv()
	if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "ctr:temp  "+mapped.String()) {
		t.Errorf("pvans query from the plant: %v\n%s", err, b)
	}

	// A pushed answer: the plant client waits for a name before its server
	// starts (on the second published port).
	pushed := make(chan map[string]nsclient.Answer, 1)
	go func() {
		got, _ := harness.Query(tp.plant, netip.AddrPortFrom(plantHost, 5075), []string{"late:pv"}, 30*time.Second)
		pushed <- got
	}()
	time.Sleep(500 * time.Millisecond) // the search is waiting in pvans
	late := startSim(t, tp.server, 5085, []string{"late:pv"})
	got := <-pushed
	if a, ok := got["late:pv"]; !ok || a.Endpoint != netip.AddrPortFrom(plantHost, 15085) || a.GUID != late.Server(0).GUID {
		t.Errorf("pushed answer %+v, want %s:15085", got, plantHost)
	}
	if g := reach(t, tp.plant, netip.AddrPortFrom(plantHost, 15085), "late:pv"); g != late.Server(0).GUID {
		t.Errorf("second server through DNAT: %s", g)
	}
}
