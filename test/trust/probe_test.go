//go:build linux

package trust

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// One host beacons 200 of its ports, each a server that completes the
// handshake and never answers CREATE_CHANNEL, so each probe of it runs to
// its timeout. A real IOC on another host that beacons afterwards is still
// listed within 5 s: that host's probes take no more than its share of the
// pool.
func TestSilentServersOfOneHostDoNotStallProbes(t *testing.T) {
	tp := newTopo(t)
	tp.start(t, "--rate-limit-beacons-per-second", "0")
	evil := tp.sim(t, sim.Options{Servers: 200, Host: evilAddr, IgnoreChannels: true, NamesPerServer: 1,
		BeaconDests: []netip.AddrPort{pvansUDP}})
	testutil.WaitFor(t, 15*time.Second, "the silent servers to be tracked", func() bool {
		return len(tp.servers(t)) >= evil.Len()
	})
	start := time.Now()
	_, g, _ := tp.ioc(t, "real:one")
	took := time.Since(start)
	t.Logf("real IOC listed %v after its first beacon, with %d silent servers being probed", took, evil.Len())
	if took > 5*time.Second {
		t.Fatalf("real IOC %v listed after %v, want within 5 s", g, took)
	}
}
