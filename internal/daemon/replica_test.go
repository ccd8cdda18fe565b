package daemon

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/testutil"
)

// Two replicas on one subnet hear each other's discovery answers and
// beacons. Each lists the other as a replica: never probed, so never a
// failing server (PvansProbesFailing counts pvans_probe_total), even when
// one's access.tcp_client_allow refuses the other's connections.
func TestReplicasOnOneSubnet(t *testing.T) {
	udpA, udpB := testutil.FreeUDPPort(t), testutil.FreeUDPPort(t)
	replica := func(own, other uint16) *config.Config {
		c := config.Loopback(testutil.FreeTCPPort(t), own)
		c.PVA.AddrList = []config.Endpoint{config.EndpointOf(netip.AddrPortFrom(lo, other))}
		c.PVA.BeaconAddrList = c.PVA.AddrList
		c.HTTP.Listen = "127.0.0.1:0"
		c.Search.DiscoveryAtStart = true
		c.UDP.SendBeacons = true
		return &c
	}
	cb := replica(udpB, udpA)
	// B refuses every TCP client on loopback but 127.0.0.2: A's probes
	// are closed at accept.
	cb.Access.TCPClientAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}
	b := startDaemon(t, cb)
	a := startDaemon(t, replica(udpA, udpB))

	for _, p := range []struct {
		name        string
		self, other *Daemon
	}{{"A", a, b}, {"B", b, a}} {
		testutil.WaitFor(t, 10*time.Second, p.name+" lists the other replica", func() bool {
			_, ok := p.self.Registry.Server(p.other.GUID())
			return ok
		})
	}
	// Long enough for a probe of B from A to fail several times over
	// (backoff from 100 ms).
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range []struct {
			name        string
			self, other *Daemon
		}{{"A", a, b}, {"B", b, a}} {
			s, _ := p.self.Registry.Server(p.other.GUID())
			if s.ProbeError != "" {
				t.Fatalf("%s shows the other replica as a failing server: probe %s (%s)", p.name, s.ProbeState, s.ProbeError)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range []struct {
		name        string
		self, other *Daemon
	}{{"A", a, b}, {"B", b, a}} {
		m := httpGet(t, p.self, "/metrics")
		for _, l := range strings.Split(m, "\n") {
			if strings.HasPrefix(l, "pvans_probe_total{") && !strings.HasSuffix(l, " 0") {
				t.Errorf("%s probed a replica: %s", p.name, l)
			}
		}
		var ss []map[string]any
		if err := json.Unmarshal([]byte(httpGet(t, p.self, "/v1/servers")), &ss); err != nil {
			t.Fatal(err)
		}
		if len(ss) != 1 || ss[0]["guid"] != p.other.GUID().String() || ss[0]["kind"] != "replica" {
			t.Errorf("%s /v1/servers = %+v, want the other replica with kind replica", p.name, ss)
		}
		if !strings.Contains(httpGet(t, p.self, "/"), ">replica<") {
			t.Errorf("%s status page does not show the other replica as a replica", p.name)
		}
	}
}
