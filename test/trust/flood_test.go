//go:build linux

package trust

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/sim"
)

// Beacons alone, from many addresses inside access.server_allow (they
// could be spoofed: no TCP is needed), fill the tracker to its limit; a
// real server starting afterwards is still learned and its names answered:
// an entry nothing proved over TCP gives way to a new endpoint (found by
// the attack on the trust surface, at the default limit of 20,000 with
// 100 senders; here the limit is 1,000 with 20, to run in seconds).
func TestBeaconFloodDoesNotHideNewServer(t *testing.T) {
	t.Parallel()
	const senders, perSender, limit = 20, 60, 1000
	tp := newTopo(t)
	tp.start(t, "--log-level", "info", "--registry-max-servers", fmt.Sprint(limit))
	conns := tp.spoofedSenders(t, senders)
	start := time.Now()
	sent := 0
	for i, c := range conns {
		for j := 0; j < perSender; j++ {
			g := pva.GUID{0xF1, byte(i), byte(j), 0, 1, 2, 3, 4, 5, 6, 7, 8}
			if _, err := c.WriteToUDPAddrPort(beaconMsg(g, pva.AnyIPv4, uint16(20000+j), "tcp"), pvansUDP); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		time.Sleep(80 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	tracked := tp.metric(t, "pvans_beacon_servers")
	t.Logf("sent %d beacons in %s; tracked %v", sent, time.Since(start), tracked)
	if tracked < limit-10 {
		t.Fatalf("tracked %v: the flood did not fill the table (limit %d)", tracked, limit)
	}
	// The real IOC starts now and beacons every second.
	site := tp.sim(t, sim.Options{Host: iocAddr, Names: [][]string{{"real:a"}}, BeaconDests: []netip.AddrPort{pvansUDP}, BeaconInterval: time.Second})
	g := site.Server(0).GUID
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if tp.holder(t, "real:a") == g.String() {
			t.Logf("real server listed %s after it started; evicted %v", time.Since(deadline.Add(-20*time.Second)).Round(time.Millisecond),
				tp.metric(t, `pvans_beacon_events_total{kind="evicted"}`))
			if n := tp.metric(t, "pvans_beacon_servers"); n > limit {
				t.Errorf("tracked %v, over the limit %d", n, limit)
			}
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	ans, err := tp.pv.Query([]string{"real:a"}, 2*time.Second)
	t.Errorf("real IOC's name not registered 20 s after it started beaconing (client answer %v %v)", ans, err)
	for _, s := range []string{`pvans_registry_limit_drops_total{what="servers"}`} {
		t.Logf("%s = %v", s, tp.metric(t, s))
	}
}

// ip4 is the last byte of flood sender i's address: from .10 on, skipping
// the attacker's own .66.
func ip4(i int) int {
	if i+10 >= 66 {
		return i + 11
	}
	return i + 10
}

// spoofedSenders gives the attacker's namespace n more addresses on its
// veth (10.213.0.10 on, skipping the attacker's own .66) and a UDP socket
// bound to each, closed when the test ends: the many senders a flood
// inside access.server_allow needs.
func (tp *topo) spoofedSenders(t *testing.T, n int) []*net.UDPConn {
	t.Helper()
	var ifname string
	tp.s.Do(func() error {
		ifs, _ := net.Interfaces()
		for _, i := range ifs {
			if i.Name != "lo" {
				ifname = i.Name
			}
		}
		return nil
	})
	conns := make([]*net.UDPConn, n)
	for i := range conns {
		src := netip.AddrFrom4([4]byte{10, 213, 0, byte(ip4(i))})
		tp.s.IP(t, fmt.Sprintf("addr add %s/24 dev %s", src, ifname))
		if err := tp.s.Do(func() error {
			c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)))
			conns[i] = c
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conns[i].Close() })
	}
	return conns
}
