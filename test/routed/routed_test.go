//go:build linux

// Package routed holds the routed-site tests: an IOC subnet and the pvans
// subnet joined by a router that forwards unicast and no broadcasts, so
// no IOC beacon reaches pvans. It checks the three ways docs/operations.md
// ("Reaching IOCs on other networks") gives pvans to find the IOCs anyway:
// periodic discovery pings to the IOC's host, a relay pvans on the IOC
// subnet, and a host name followed in DNS (a real dnsmasq started by the
// test inside its namespace). It has no non-test code; everything runs in
// network namespaces the test makes.
package routed

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

// The topology; these addresses exist only inside the namespaces.
//
//	IOC subnet 10.71.1.0/24 (bridge in the router)      pvans subnet 10.71.2.0/24
//	ioc    10.71.1.5, 10.71.1.9 ─┐
//	                             ├─ 10.71.1.1 router 10.71.2.1 ── 10.71.2.10 pvans (+ clients)
//	relay  10.71.1.6, 10.71.1.7 ─┘   (dnsmasq on 10.71.2.1:53)
//
// The router forwards IPv4 unicast (ip_forward=1) and no broadcasts
// (bc_forwarding=0, the kernel default, set explicitly).
var (
	iocA      = netip.MustParseAddr("10.71.1.5")
	iocB      = netip.MustParseAddr("10.71.1.9") // the "pod" after its restart
	relayAddr = netip.MustParseAddr("10.71.1.6")
	rogue     = netip.MustParseAddr("10.71.1.7") // on the IOC subnet, not a trusted relay
	routerIOC = netip.MustParseAddr("10.71.1.1")
	routerPV  = netip.MustParseAddr("10.71.2.1")
	pvansAddr = netip.MustParseAddr("10.71.2.10")
	iocName   = "ioc.pvans-routed.test"
)

var seq atomic.Int32

type topo struct {
	ioc, relay, router, pvans *testutil.Netns
}

func newTopo(t *testing.T) *topo {
	t.Helper()
	testutil.RequireNetns(t, "routed-site tests")
	if testing.Short() {
		t.Skip("runs pvans in namespaces; skipped with -short")
	}
	testutil.CleanStaleNetns(regexp.MustCompile(`^pvans-rt-[a-z]+-(\d+)-\d+$`))
	testutil.PvansBinary(t)
	id := fmt.Sprintf("%d-%d", os.Getpid(), seq.Add(1))
	tp := &topo{}
	for _, n := range []struct {
		p    **testutil.Netns
		kind string
	}{{&tp.ioc, "ioc"}, {&tp.relay, "relay"}, {&tp.router, "router"}, {&tp.pvans, "pvans"}} {
		*n.p = testutil.NewNetns(t, "pvans-rt-"+n.kind+"-"+id)
	}
	i := seq.Add(1)
	testutil.Veth(t, tp.ioc, fmt.Sprintf("rti%d", i), []string{iocA.String() + "/24 brd +", iocB.String() + "/24"}, tp.router, fmt.Sprintf("rtj%d", i), nil)
	testutil.Veth(t, tp.relay, fmt.Sprintf("rtr%d", i), []string{relayAddr.String() + "/24 brd +", rogue.String() + "/24"}, tp.router, fmt.Sprintf("rts%d", i), nil)
	testutil.Veth(t, tp.pvans, fmt.Sprintf("rtq%d", i), []string{pvansAddr.String() + "/24 brd +"}, tp.router, fmt.Sprintf("rtp%d", i), []string{routerPV.String() + "/24 brd +"})
	tp.router.IP(t, "link add br0 type bridge")
	tp.router.IP(t, "addr add "+routerIOC.String()+"/24 brd + dev br0")
	tp.router.IP(t, fmt.Sprintf("link set rtj%d master br0", i))
	tp.router.IP(t, fmt.Sprintf("link set rts%d master br0", i))
	tp.router.IP(t, "link set br0 up")
	for _, n := range []*testutil.Netns{tp.ioc, tp.relay} {
		n.IP(t, "route add default via "+routerIOC.String())
	}
	tp.pvans.IP(t, "route add default via "+routerPV.String())
	for _, kv := range []string{"net.ipv4.ip_forward=1", "net.ipv4.conf.all.bc_forwarding=0", "net.ipv4.conf.default.bc_forwarding=0"} {
		testutil.Run(t, "ip", "netns", "exec", tp.router.Name, "sysctl", "-qw", kv)
	}
	return tp
}

// startIOC runs one simulated IOC in the IOC namespace at host:5075,
// answering discovery pings on host:5076 and sending its beacons to
// beaconTo (none when invalid).
func startIOC(t *testing.T, n *testutil.Netns, host netip.Addr, names []string, beaconTo netip.AddrPort) *sim.Site {
	t.Helper()
	return startIOCEvery(t, n, host, names, beaconTo, 500*time.Millisecond)
}

// startIOCEvery is startIOC with the IOC beaconing every interval (the
// first beacon at once).
func startIOCEvery(t *testing.T, n *testutil.Netns, host netip.Addr, names []string, beaconTo netip.AddrPort, interval time.Duration) *sim.Site {
	t.Helper()
	o := sim.Options{Host: host, TCPPort: 5075, UDPPort: 5076, Names: [][]string{names}, BeaconInterval: interval}
	if beaconTo.IsValid() {
		o.BeaconDests = []netip.AddrPort{beaconTo}
	}
	var site *sim.Site
	if err := n.Do(func() (err error) { site, err = sim.Start(context.Background(), o); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	return site
}

// resolve asks pvans for name over TCP from the pvans subnet, as a client
// there would, and then connects to the endpoint it was told, across the
// router, and asks the server there: it returns the endpoint and the GUID
// of the server reached.
func resolve(t *testing.T, tp *topo, name string) (netip.AddrPort, pva.GUID) {
	t.Helper()
	got, err := harness.Query(tp.pvans, netip.AddrPortFrom(pvansAddr, 5075), []string{name}, 3*time.Second)
	if err != nil {
		t.Fatalf("query pvans: %v", err)
	}
	a, ok := got[name]
	if !ok {
		return netip.AddrPort{}, pva.GUID{}
	}
	direct, err := harness.Query(tp.pvans, a.Endpoint, []string{name}, 3*time.Second)
	if err != nil {
		t.Fatalf("the client cannot reach %s, which pvans named for %s: %v", a.Endpoint, name, err)
	}
	if d, ok := direct[name]; !ok || d.GUID != a.GUID {
		t.Fatalf("the server at %s does not claim %s under the GUID pvans named (%v)", a.Endpoint, name, direct)
	}
	return a.Endpoint, a.GUID
}

// central starts the pvans the clients use, on the pvans subnet.
func central(t *testing.T, tp *topo, env []string, args ...string) *harness.Pvans {
	t.Helper()
	return harness.Start(t, harness.Options{Netns: tp.pvans, Addr: pvansAddr, Env: env, Args: args})
}

func TestRouted(t *testing.T) {
	tp := newTopo(t)

	// Beacons do not cross the router: an IOC beaconing to its subnet's
	// broadcast address is never heard on the pvans subnet (checked in
	// each case below by the IOC starting after pvans and being found
	// only by the way the case sets up).

	t.Run("periodic discovery to the IOC host", func(t *testing.T) {
		const interval = 3 * time.Second
		p := central(t, tp, nil, "--addr-list", iocA.String(), "--discovery-interval", interval.String())
		time.Sleep(500 * time.Millisecond) // pvans's start-up ping has gone unanswered
		ioc := startIOC(t, tp.ioc, iocA, []string{"rt:disc:temp"}, netip.AddrPortFrom(netip.MustParseAddr("10.71.1.255"), 5076))
		took := testutil.WaitFor(t, interval+5*time.Second, "pvans lists the IOC found by a periodic discovery ping", func() bool {
			ok, _ := p.HasName("rt:disc:temp")
			return ok
		})
		t.Logf("IOC on the routed subnet listed %s after it started (discovery.interval %s)", took.Round(time.Millisecond), interval)
		if took > interval+2*time.Second {
			t.Errorf("found after %s, more than one interval (%s) and a probe", took, interval)
		}
		ep, g := resolve(t, tp, "rt:disc:temp")
		if ep != netip.AddrPortFrom(iocA, 5075) || g != ioc.Server(0).GUID {
			t.Errorf("clients told %s %s, want %s:5075 %s", ep, g, iocA, ioc.Server(0).GUID)
		}
		if n := p.Metric(t, `pvans_discovery_rounds_total{trigger="periodic"}`); n < 1 {
			t.Errorf("periodic discovery rounds %v", n)
		}
	})

	t.Run("relay pvans on the IOC subnet", func(t *testing.T) {
		p := central(t, tp, nil, "--access-trusted-relays", relayAddr.String()+"/32")
		relay := harness.Start(t, harness.Options{Netns: tp.relay, Addr: relayAddr, Subcommand: "relay",
			Args: []string{"--relay-to", pvansAddr.String()}})
		// The IOC beacons as IOCs do, to its subnet (here: the relay's
		// address, EPICS_PVAS_BEACON_ADDR_LIST); nothing reaches pvans.
		ioc := startIOC(t, tp.ioc, iocA, []string{"rt:relay:temp"}, netip.AddrPortFrom(relayAddr, 5076))
		took := testutil.WaitFor(t, 10*time.Second, "the central pvans lists the IOC the relay heard", func() bool {
			ok, _ := p.HasName("rt:relay:temp")
			return ok
		})
		t.Logf("relayed IOC listed %s after it started", took.Round(time.Millisecond))
		ep, g := resolve(t, tp, "rt:relay:temp")
		if ep != netip.AddrPortFrom(iocA, 5075) || g != ioc.Server(0).GUID {
			t.Errorf("clients told %s %s, want %s:5075 %s", ep, g, iocA, ioc.Server(0).GUID)
		}
		if n := relay.Metric(t, "pvans_relay_sightings_total"); n < 1 {
			t.Errorf("relay sightings %v", n)
		}
		// The relay profile lists nothing itself and has no name server.
		if n := relay.Metric(t, "pvans_registry_servers"); n > 0 {
			t.Errorf("the relay registered %v servers", n)
		}
		if err := tp.relay.Do(func() error {
			c, err := net.DialTimeout("tcp", netip.AddrPortFrom(relayAddr, 5075).String(), time.Second)
			if err == nil {
				c.Close()
				return fmt.Errorf("the relay profile accepts TCP on 5075")
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	})

	// A central instance started after the relay, with no snapshot, knows
	// every IOC of the routed site within seconds (issue 41): it pings its
	// trusted relay at start, and the relay sends it again every server it
	// heard first hand. The IOCs beacon once a minute and beaconed before
	// the central was up (their sightings relayed to nobody), and the
	// relay asks nothing of its subnet: only the re-announce explains it.
	t.Run("central started after the relay", func(t *testing.T) {
		relay := harness.Start(t, harness.Options{Netns: tp.relay, Addr: relayAddr, Subcommand: "relay",
			Args: []string{"--relay-to", pvansAddr.String()}})
		names := map[string]netip.AddrPort{}
		guids := map[string]pva.GUID{}
		for i, host := range []netip.Addr{iocA, iocB} {
			name := fmt.Sprintf("rt:late:%d", i)
			ioc := startIOCEvery(t, tp.ioc, host, []string{name}, netip.AddrPortFrom(relayAddr, 5076), time.Minute)
			names[name], guids[name] = netip.AddrPortFrom(host, 5075), ioc.Server(0).GUID
		}
		if _, ok := relay.WaitMetric("pvans_relay_sightings_total", func(v float64) bool { return v >= 2 }, 50*time.Millisecond, 10*time.Second); !ok {
			t.Fatal("the relay did not hear both IOCs' first beacons")
		}
		p := central(t, tp, nil, "--access-trusted-relays", relayAddr.String()+"/32")
		took := testutil.WaitFor(t, 10*time.Second, "the central pvans, started after the IOCs' beacons, lists every IOC of the site", func() bool {
			for name := range names {
				if ok, _ := p.HasName(name); !ok {
					return false
				}
			}
			return true
		})
		t.Logf("every IOC listed %s after the central started", took.Round(time.Millisecond))
		for name, want := range names {
			if ep, g := resolve(t, tp, name); ep != want || g != guids[name] {
				t.Errorf("%s: clients told %s %s, want %s %s", name, ep, g, want, guids[name])
			}
		}
		if n := relay.Metric(t, "pvans_relay_reannounced_total"); n < 2 {
			t.Errorf("relay re-announced %v sightings", n)
		}
		if n := relay.Metric(t, "pvans_relay_sightings_total"); n != 2 {
			t.Errorf("the relay relayed %v live sightings, want the 2 first beacons: something else beaconed", n)
		}
	})

	// Two instances relaying to each other, each trusting the other: a
	// relay passes on only what it heard first hand, so the IOC's beacons
	// go relay → central once, never back (issue 39: one beacon went round
	// 401 times, until the rate bounds stopped it).
	t.Run("relays relaying to each other", func(t *testing.T) {
		p := central(t, tp, nil, "--access-trusted-relays", relayAddr.String()+"/32", "--relay-to", relayAddr.String())
		relay := harness.Start(t, harness.Options{Netns: tp.relay, Addr: relayAddr, Subcommand: "relay",
			Args: []string{"--relay-to", pvansAddr.String(), "--access-trusted-relays", pvansAddr.String() + "/32"}})
		began := time.Now()
		startIOC(t, tp.ioc, iocA, []string{"rt:loop:temp"}, netip.AddrPortFrom(relayAddr, 5076))
		testutil.WaitFor(t, 10*time.Second, "the central pvans lists the IOC the relay heard", func() bool {
			ok, _ := p.HasName("rt:loop:temp")
			return ok
		})
		time.Sleep(2 * time.Second) // four more beacons
		back := p.Metric(t, "pvans_relay_sightings_total")
		sent := relay.Metric(t, "pvans_relay_sightings_total")
		beacons := float64(time.Since(began)/(500*time.Millisecond)) + 2 // at most, one every 500 ms from the start
		t.Logf("IOC beacons ≤ %v, relayed by the relay %v, by the central %v", beacons, sent, back)
		if back != 0 {
			t.Errorf("the central pvans relayed %v sightings it was relayed", back)
		}
		if sent > beacons {
			t.Errorf("the relay relayed %v sightings for %v beacons: what it was relayed went round", sent, beacons)
		}
		// The central heard the relay's sightings, and counted them.
		if n := p.Metric(t, `pvans_relay_dropped_total{reason="second_hand"}`); n < 3 {
			t.Errorf("the central pvans counted %v second-hand sightings", n)
		}
	})

	t.Run("relayed beacon from outside trusted_relays", func(t *testing.T) {
		p := central(t, tp, nil, "--access-trusted-relays", relayAddr.String()+"/32")
		// An IOC nobody announces; its beacons go nowhere.
		ioc := startIOC(t, tp.ioc, iocA, []string{"rt:rogue:temp"}, netip.AddrPort{})
		guid := ioc.Server(0).GUID
		before := p.Metric(t, `pvans_hints_dropped_total{reason="address_mismatch"}`)
		send := func(from netip.Addr) {
			t.Helper()
			b := pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer, &pva.Beacon{GUID: guid, Addr: pva.AddressFrom(iocA), Port: 5075, Protocol: "tcp"})
			if err := tp.relay.Do(func() error {
				c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(from, 0)))
				if err != nil {
					return err
				}
				defer c.Close()
				for range 3 {
					if _, err := c.WriteToUDPAddrPort(b, netip.AddrPortFrom(pvansAddr, 5076)); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		send(rogue)
		if _, ok := p.WaitMetric(`pvans_hints_dropped_total{reason="address_mismatch"}`, func(v float64) bool { return v >= before+3 }, 50*time.Millisecond, 5*time.Second); !ok {
			t.Fatalf("the rogue relay's beacons were not dropped as address_mismatch")
		}
		time.Sleep(2 * time.Second) // long enough for a probe, had one started
		if ok, _ := p.HasName("rt:rogue:temp"); ok {
			t.Fatal("a beacon relayed from outside access.trusted_relays got its server listed")
		}
		if ep, _ := resolve(t, tp, "rt:rogue:temp"); ep.IsValid() {
			t.Fatalf("clients told %s", ep)
		}
		// The same datagram from the trusted relay is taken: the drop was
		// the trust rule, not reachability.
		send(relayAddr)
		testutil.WaitFor(t, 10*time.Second, "the trusted relay's beacon gets the IOC listed", func() bool {
			ok, _ := p.HasName("rt:rogue:temp")
			return ok
		})
	})

	t.Run("host name followed in DNS", func(t *testing.T) {
		if _, err := exec.LookPath("dnsmasq"); err != nil {
			t.Skip("needs dnsmasq (apt-get install dnsmasq-base); skipping")
		}
		dns := startDNS(t, tp, iocA)
		const refresh = 2 * time.Second
		p := central(t, tp, []string{"GODEBUG=netdns=go"},
			"--static-servers", iocName+":5075", "--dns-refresh", refresh.String())
		first := startIOC(t, tp.ioc, iocA, []string{"rt:dns:temp"}, netip.AddrPort{})
		testutil.WaitFor(t, 15*time.Second, "pvans lists the IOC by its host name", func() bool {
			ok, _ := p.HasName("rt:dns:temp")
			return ok
		})
		if ep, g := resolve(t, tp, "rt:dns:temp"); ep != netip.AddrPortFrom(iocA, 5075) || g != first.Server(0).GUID {
			t.Fatalf("before the restart clients told %s %s", ep, g)
		}

		// The pod restarts: the old one stops, the new one runs at another
		// address with a new GUID, and DNS answers with that address.
		first.Close()
		second := startIOC(t, tp.ioc, iocB, []string{"rt:dns:temp"}, netip.AddrPort{})
		dns.set(t, iocB)
		// Only a lookup after the change moves it (the old address has no
		// server left, and no beacon names the new one): a generous wait.
		took := testutil.WaitFor(t, refresh+60*time.Second, "clients are told the new address", func() bool {
			got, err := harness.Query(tp.pvans, netip.AddrPortFrom(pvansAddr, 5075), []string{"rt:dns:temp"}, 500*time.Millisecond)
			return err == nil && got["rt:dns:temp"].Endpoint == netip.AddrPortFrom(iocB, 5075)
		})
		t.Logf("pvans followed the name to its new address %s after DNS changed (dns.refresh %s)", took.Round(time.Millisecond), refresh)
		if ep, g := resolve(t, tp, "rt:dns:temp"); ep != netip.AddrPortFrom(iocB, 5075) || g != second.Server(0).GUID {
			t.Errorf("after the restart clients told %s %s, want %s:5075 %s", ep, g, iocB, second.Server(0).GUID)
		}
		if n := p.Metric(t, "pvans_dns_changes_total"); n < 1 {
			t.Errorf("pvans_dns_changes_total %v", n)
		}
	})
}

// dnsServer is a dnsmasq answering iocName from a hosts file, inside the
// router namespace, on the router's pvans-side address only.
type dnsServer struct {
	proc  *testutil.Proc
	hosts string
}

// startDNS starts dnsmasq with iocName at addr, and points the pvans
// namespace's resolver at it (/etc/netns/NAME/resolv.conf, which
// `ip netns exec` mounts over /etc/resolv.conf for that namespace only).
func startDNS(t *testing.T, tp *topo, addr netip.Addr) *dnsServer {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // dnsmasq reads it as nobody
		t.Fatal(err)
	}
	s := &dnsServer{hosts: filepath.Join(dir, "hosts")}
	s.write(t, addr)
	cmd := tp.router.Command("dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
		"--listen-address="+routerPV.String(), "--bind-interfaces", "--port=53", "--pid-file=",
		"--addn-hosts="+s.hosts, "--local-ttl=0", "--log-facility=-")
	s.proc = testutil.StartProc(t, "dnsmasq", cmd)

	etc := filepath.Join("/etc/netns", tp.pvans.Name)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(etc) })
	if err := os.WriteFile(filepath.Join(etc, "resolv.conf"), []byte("nameserver "+routerPV.String()+"\noptions timeout:1 attempts:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Up once it has bound its socket and read the hosts file.
	testutil.WaitFor(t, 10*time.Second, "dnsmasq reads its hosts file", func() bool {
		return strings.Contains(s.proc.Output(), "read "+s.hosts)
	})
	return s
}

func (s *dnsServer) write(t *testing.T, addr netip.Addr) {
	t.Helper()
	tmp := s.hosts + ".tmp"
	if err := os.WriteFile(tmp, []byte(addr.String()+" "+iocName+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.hosts); err != nil {
		t.Fatal(err)
	}
}

// set changes the name's address and has dnsmasq read its hosts file
// again (SIGHUP, to its own pid).
func (s *dnsServer) set(t *testing.T, addr netip.Addr) {
	t.Helper()
	s.write(t, addr)
	if err := s.proc.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}
