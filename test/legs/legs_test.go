//go:build linux

// Package legs holds the two-legged gateway host test: pvans on a host
// with one leg on the IOC network and one on the client network, serving
// only the IOC side (pva.interfaces), must learn servers only from the
// networks it serves (udp.learn_interfaces widens that). It has no
// non-test code. Everything runs in network namespaces the test makes;
// docs/configuration.md ("UDP binding") describes the behaviour checked.
package legs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

// The topology; these addresses exist only inside the namespaces.
//
//	IOC net                                  client net
//	10.77.0.2 (beacons) ─┐                 ┌─ 10.78.0.2 (beacons to 10.78.0.1)
//	10.77.0.3 (answers  ─┴─ 10.77.0.1 pvans 10.78.0.1 ─┼─ 10.78.0.3 (answers pings)
//	           pings)        host                      └─ 10.78.0.4 (beacons to 10.77.0.1)
//
// The client net routes the IOC net through the host, so a client-side
// sender can address the IOC-side address 10.77.0.1: the datagram still
// arrives on the client leg.
var (
	iocLeg     = netip.MustParseAddr("10.77.0.1")
	iocBeacon  = netip.MustParseAddr("10.77.0.2")
	iocPing    = netip.MustParseAddr("10.77.0.3")
	clientLeg  = netip.MustParseAddr("10.78.0.1")
	cliBeacon  = netip.MustParseAddr("10.78.0.2")
	cliPing    = netip.MustParseAddr("10.78.0.3")
	cliCross   = netip.MustParseAddr("10.78.0.4")
	searchPort = uint16(5076)
)

type topo struct {
	host, ioc, client *testutil.Netns
	// Beaconing servers and servers heard only through discovery pings,
	// on each side.
	iocB, iocP, cliB, cliP, cliX *sim.Site
}

func newTopo(t *testing.T) *topo {
	t.Helper()
	testutil.RequireNetns(t, "two-legged host tests")
	if testing.Short() {
		t.Skip("runs the daemon in namespaces; skipped with -short")
	}
	testutil.PvansBinary(t)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	r := hex.EncodeToString(b)
	tp := &topo{
		host:   testutil.NewNetns(t, fmt.Sprintf("pvans-lh-%d-%s", os.Getpid(), r)),
		ioc:    testutil.NewNetns(t, fmt.Sprintf("pvans-li-%d-%s", os.Getpid(), r)),
		client: testutil.NewNetns(t, fmt.Sprintf("pvans-lc-%d-%s", os.Getpid(), r)),
	}
	testutil.Veth(t, tp.host, "lgi"+r, []string{iocLeg.String() + "/24 brd +"},
		tp.ioc, "lgI"+r, []string{iocBeacon.String() + "/24 brd +", iocPing.String() + "/24"})
	testutil.Veth(t, tp.host, "lgc"+r, []string{clientLeg.String() + "/24 brd +"},
		tp.client, "lgC"+r, []string{cliBeacon.String() + "/24 brd +", cliPing.String() + "/24", cliCross.String() + "/24"})
	tp.client.IP(t, "route add 10.77.0.0/24 via "+clientLeg.String())

	beaconTo := func(a ...netip.Addr) []netip.AddrPort {
		var l []netip.AddrPort
		for _, x := range a {
			l = append(l, netip.AddrPortFrom(x, searchPort))
		}
		return l
	}
	tp.iocB = startSim(t, tp.ioc, iocBeacon, "ioc:beacon", beaconTo(iocLeg))
	tp.iocP = startSim(t, tp.ioc, iocPing, "ioc:ping", nil)
	// The client side beacons to its own leg and, through the host's
	// routing, to the IOC-side address: both arrive on the client leg.
	tp.cliB = startSim(t, tp.client, cliBeacon, "cli:beacon", beaconTo(clientLeg))
	tp.cliP = startSim(t, tp.client, cliPing, "cli:ping", nil)
	tp.cliX = startSim(t, tp.client, cliCross, "cli:cross", beaconTo(iocLeg))
	return tp
}

// startSim runs one simulated server at host in n, beaconing every 300 ms
// to dests (none: it is heard only by answering discovery pings at its
// site socket).
func startSim(t *testing.T, n *testutil.Netns, host netip.Addr, name string, dests []netip.AddrPort) *sim.Site {
	t.Helper()
	var site *sim.Site
	err := n.Do(func() (err error) {
		site, err = sim.Start(context.Background(), sim.Options{Host: host, TCPPort: 5075, Names: [][]string{{name}},
			BeaconDests: dests, BeaconInterval: 300 * time.Millisecond})
		return
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	return site
}

// start runs pvans in the host namespace serving the IOC leg only, with
// one discovery ping at start to both sides' ping-answering servers.
func (tp *topo) start(t *testing.T, extra ...string) *harness.Pvans {
	t.Helper()
	addrList := tp.iocP.UDPAddr().String() + " " + tp.cliP.UDPAddr().String()
	args := append([]string{"--addr-list", addrList, "--discovery-at-start", "--log-level", "debug"}, extra...)
	return harness.Start(t, harness.Options{Netns: tp.host, Interfaces: iocLeg.String(), Args: args})
}

func waitNames(t *testing.T, pv *harness.Pvans, names ...string) {
	t.Helper()
	testutil.WaitFor(t, 15*time.Second, fmt.Sprintf("%v listed", names), func() bool {
		for _, n := range names {
			if ok, err := pv.HasName(n); err != nil || !ok {
				return false
			}
		}
		return true
	})
}

const interfaceDrops = `pvans_hints_dropped_total{reason="interface"}`

// With pva.interfaces naming the IOC-side address only, the IOC side's
// servers (beacon and discovery reply) are learned and listed; the client
// side's are never probed, and what they sent is counted as dropped for
// its arrival interface.
func TestOnlyServedLegIsLearned(t *testing.T) {
	tp := newTopo(t)
	pv := tp.start(t)
	waitNames(t, pv, "ioc:beacon", "ioc:ping")
	// Several beacon rounds of the client side (every 300 ms) after the
	// IOC side's were taken.
	time.Sleep(2 * time.Second)
	for _, c := range []struct {
		site *sim.Site
		name string
	}{{tp.cliB, "cli:beacon"}, {tp.cliP, "cli:ping"}, {tp.cliX, "cli:cross"}} {
		if n := c.site.Server(0).Accepted; n != 0 {
			t.Errorf("client-side server %s was probed (%d TCP connections)", c.site.Server(0).TCP, n)
		}
		if ok, err := pv.HasName(c.name); err != nil || ok {
			t.Errorf("client-side name %s listed (%v)", c.name, err)
		}
	}
	// Two beacons a round from the client side, and its discovery reply.
	v := pv.Metric(t, interfaceDrops)
	t.Logf("%s = %v", interfaceDrops, v)
	if v < 3 {
		t.Errorf("%s = %v, want >= 3", interfaceDrops, v)
	}
	for _, s := range []*sim.Site{tp.iocB, tp.iocP} {
		if s.Server(0).Accepted == 0 {
			t.Errorf("IOC-side server %s listed without a probe connection?", s.Server(0).TCP)
		}
	}
	if t.Failed() {
		t.Logf("metrics: %s", metricLines(t, pv, "hints_dropped", "beacons_total"))
	}
}

// udp.learn_interfaces "all" learns from every interface.
func TestLearnInterfacesAll(t *testing.T) {
	tp := newTopo(t)
	pv := tp.start(t, "--udp-learn-interfaces", "all")
	waitNames(t, pv, "ioc:beacon", "ioc:ping", "cli:beacon", "cli:ping", "cli:cross")
	if v := pv.Metric(t, interfaceDrops); v != 0 {
		t.Errorf("%s = %v with udp.learn_interfaces all, want 0", interfaceDrops, v)
	}
}

// Serve here, learn there: pvans serving the client leg (pva.interfaces)
// and learning on the IOC leg (udp.learn_interfaces) learns the IOC
// side's servers only, answers the client side, and sends its automatic
// discovery only to the IOC leg's broadcast address, never the client
// leg's.
func TestServeOneLegLearnTheOther(t *testing.T) {
	tp := newTopo(t)
	listen := func(n *testutil.Netns, a netip.Addr) *net.UDPConn {
		var c *net.UDPConn
		if err := n.Do(func() (err error) {
			c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, searchPort)))
			return
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	iocBcast := listen(tp.ioc, netip.MustParseAddr("10.77.0.255"))
	cliBcast := listen(tp.client, netip.MustParseAddr("10.78.0.255"))

	pv := harness.Start(t, harness.Options{Netns: tp.host, Interfaces: clientLeg.String(), Args: []string{
		"--udp-learn-interfaces", iocLeg.String(), "--auto-addr-list=true", "--addr-list", tp.iocP.UDPAddr().String(),
		"--discovery-at-start", "--log-level", "debug"}})
	// The automatic list reached the IOC leg's broadcast address.
	buf := make([]byte, 2048)
	_ = iocBcast.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, _, err := iocBcast.ReadFromUDPAddrPort(buf); err != nil {
		t.Fatalf("no discovery at the IOC leg's broadcast address: %v", err)
	}
	waitNames(t, pv, "ioc:beacon", "ioc:ping")
	// Several beacon rounds of the client side (every 300 ms).
	time.Sleep(2 * time.Second)
	for _, c := range []struct {
		site *sim.Site
		name string
	}{{tp.cliB, "cli:beacon"}, {tp.cliP, "cli:ping"}, {tp.cliX, "cli:cross"}} {
		if n := c.site.Server(0).Accepted; n != 0 {
			t.Errorf("client-side server %s was probed (%d TCP connections)", c.site.Server(0).TCP, n)
		}
		if ok, err := pv.HasName(c.name); err != nil || ok {
			t.Errorf("client-side name %s listed (%v)", c.name, err)
		}
	}
	_ = cliBcast.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, from, err := cliBcast.ReadFromUDPAddrPort(buf); err == nil {
		t.Errorf("pvans sent %d bytes from %s to the client leg's broadcast address", n, from)
	}
	// Clients on the served leg are answered: the IOC side's names over
	// the TCP name server on the client leg.
	ans, err := harness.Query(tp.client, netip.AddrPortFrom(clientLeg, pv.TCP.Port()), []string{"ioc:beacon"}, 5*time.Second)
	if a, ok := ans["ioc:beacon"]; err != nil || !ok || a.Endpoint != tp.iocB.Server(0).TCP {
		t.Errorf("a client on the served leg asking for ioc:beacon: %+v, %v", ans, err)
	}
}

// metricLines is the /metrics lines naming any of subs, for a failure
// message.
func metricLines(t *testing.T, pv *harness.Pvans, subs ...string) string {
	t.Helper()
	_, b, err := pv.Get("/metrics")
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, s := range subs {
			if strings.Contains(l, s) && !strings.HasPrefix(l, "#") {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// An address of pva.interfaces that is not configured when pvans starts
// (a host whose network comes up late) does not stop pvans: the TCP name
// server binds it anyway and serves it once it appears.
func TestInterfaceAddressLate(t *testing.T) {
	testutil.RequireNetns(t, "two-legged host tests")
	if testing.Short() {
		t.Skip("runs the daemon in namespaces; skipped with -short")
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	r := hex.EncodeToString(b)
	host := testutil.NewNetns(t, fmt.Sprintf("pvans-ll-%d-%s", os.Getpid(), r))
	client := testutil.NewNetns(t, fmt.Sprintf("pvans-lk-%d-%s", os.Getpid(), r))
	testutil.Veth(t, host, "llh"+r, []string{"10.79.0.1/24 brd +"}, client, "llc"+r, []string{"10.79.0.2/24 brd +"})
	late := netip.MustParseAddr("10.79.0.5")
	pv := harness.Start(t, harness.Options{Netns: host, Interfaces: late.String()})
	host.IP(t, "addr add "+late.String()+"/24 dev llh"+r)
	ep := netip.AddrPortFrom(late, pv.TCP.Port())
	testutil.WaitFor(t, 10*time.Second, "the name server on the late address", func() bool {
		return client.Do(func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			c, err := nsclient.Dial(ctx, ep)
			if err == nil {
				c.Close()
			}
			return err
		}) == nil
	})
}
