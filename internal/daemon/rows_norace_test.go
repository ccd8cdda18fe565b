//go:build !race

package daemon

import (
	"context"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/testutil"
)

// rowBytes is what docs/SECURITY.md's bounds table says a server row
// forged by beacons costs, everything it holds counted: the beacon
// tracker's entry, the registry's row, the prober's server and its queued
// probe, and the stacks of the goroutines it makes.
const rowBytes = 4 << 10

// 20,000 forged server rows (registry.max_servers, the documented size):
// forged beacons name as many endpoints that never answer, and every row
// waits for a probe. The rows cost about rowBytes each and the goroutines
// stay those of the probe pool, not one per waiting probe. (Not under
// -race: its shadow memory makes heap figures meaningless.)
func TestForgedRowsCost(t *testing.T) {
	c := testConfig(t)
	const rows = 20000
	if c.Registry.MaxServers != rows {
		t.Fatalf("registry.max_servers defaults to %d: the documented size is %d", c.Registry.MaxServers, rows)
	}
	hold := make(chan struct{})
	defer close(hold)
	dial := func(ctx context.Context, _ netip.AddrPort, _ pvaconn.Options, _ pvaconn.Handler) (*pvaconn.Conn, error) {
		select { // a forged endpoint: nothing answers
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-hold:
			return nil, context.Canceled
		}
	}
	d, err := New(c, Options{Logger: zap.NewNop(), Clock: clock.NewFake(time.Unix(1_000_000, 0)), ProbeDial: dial})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	mem := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc + m.StackInuse
	}
	m0, g0 := mem(), runtime.NumGoroutine()
	for i := range rows {
		g := pva.GUID{0xba, 0xdb, 0xad, byte(i >> 8), byte(i)}
		ep := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 1, byte(i >> 8), byte(i)}), 5075)
		beaconFilter{d}.Observe(beacon.Observation{GUID: g, Endpoint: ep, Protocol: "tcp", Via: beacon.ViaBeacon,
			From: netip.AddrPortFrom(ep.Addr(), 5076)})
	}
	conc := probe.DefaultConcurrency
	// The pool works through them at probe.DefaultFirstTimeout (wall clock):
	// nearly every row still waits when measured.
	testutil.WaitFor(t, 10*time.Second, "the rows waiting for a probe", func() bool { return d.Prober.Stats().Waiting >= rows-10*conc })
	if n := d.Registry.Counts().Servers; n != rows {
		t.Fatalf("%d rows, want %d", n, rows)
	}
	m1, g1 := mem(), runtime.NumGoroutine()
	per := (m1 - m0) / rows
	t.Logf("%d forged rows: heap and stacks +%.1f MiB (%d B a row), goroutines %d → %d", rows, float64(m1-m0)/(1<<20), per, g0, g1)
	if g1-g0 > conc+20 {
		t.Errorf("%d goroutines more for %d rows, want the probe pool's %d and a few", g1-g0, rows, conc)
	}
	if per > rowBytes {
		t.Errorf("a forged row costs %d B, docs/SECURITY.md says %d", per, rowBytes)
	}
}
