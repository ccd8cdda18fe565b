//go:build linux

package trust

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// Forged beacons cycling over more endpoints than the table holds (limit
// 100), from 40 spoofed senders under the per-sender rate, at ports whose
// SYNs are dropped: every new endpoint evicts an unproven one. The
// evicted endpoints' probes end (goroutines stay flat), and a real server
// starting in the middle of the churn is listed from its first beacon,
// not evicted before its probe runs (its clock never moves, so it sends
// no other: evicted, it would never be listed) (found by the attack on the eviction: 33,000
// goroutines after 90 s, and the real server never listed).
func TestEvictionChurnBounded(t *testing.T) {
	t.Parallel()
	const senders, limit, ports, rounds, realAt = 40, 100, 400, 200, 60
	tp := newTopo(t)
	tp.start(t, "--log-level", "info", "--registry-max-servers", fmt.Sprint(limit))
	for _, args := range [][]string{
		{"add", "table", "inet", "churn"},
		{"add", "chain", "inet", "churn", "in", "{ type filter hook input priority 0; }"},
		{"add", "rule", "inet", "churn", "in", "tcp", "dport", "20000-29999", "drop"},
	} {
		if out, err := tp.s.Command("nft", args...).CombinedOutput(); err != nil {
			t.Skipf("nft %v: %v %s", args, err, out)
		}
	}
	conns := tp.spoofedSenders(t, senders)
	var realG pva.GUID
	var realStart time.Time
	listed := time.Duration(-1)
	peak := 0.0
	for round := 0; round < rounds; round++ {
		for i, c := range conns {
			port := uint16(20000 + round%ports)
			g := pva.GUID{0xF1, byte(i), byte(port >> 8), byte(port), 1, 2, 3, 4, 5, 6, 7, 8}
			c.WriteToUDPAddrPort(beaconMsg(g, pva.AnyIPv4, port, "tcp"), pvansUDP)
		}
		time.Sleep(100 * time.Millisecond) // 10 beacons a second per sender
		if round == realAt {
			site := tp.sim(t, sim.Options{Host: iocAddr, Names: [][]string{{"real:a"}}, BeaconDests: []netip.AddrPort{pvansUDP},
				Clock: clock.NewFake(time.Now())})
			realG, realStart = site.Server(0).GUID, time.Now()
		}
		if round > realAt && listed < 0 && tp.holder(t, "real:a") == realG.String() {
			listed = time.Since(realStart)
		}
		if round%20 == 0 {
			peak = max(peak, tp.metric(t, "go_goroutines"))
		}
	}
	evicted := tp.metric(t, `pvans_beacon_events_total{kind="evicted"}`)
	t.Logf("evicted %v; goroutines at most %v; waiting probes %v; real server listed after %v",
		evicted, peak, tp.metric(t, "pvans_probe_waiting"), listed)
	if evicted < 1000 {
		t.Fatalf("only %v evictions: the churn did not run", evicted)
	}
	// The table's endpoints each have at most one probe; anything beyond
	// that and the daemon's fixed goroutines is a leak.
	if peak > 4*limit {
		t.Errorf("goroutines reached %v with a table of %d: probes of evicted endpoints were left running", peak, limit)
	}
	if listed < 0 { // the probe may still run on a loaded machine: a hang guard
		testutil.WaitFor(t, 60*time.Second, "the real server listed from its one beacon", func() bool { return tp.holder(t, "real:a") == realG.String() })
	}
}
