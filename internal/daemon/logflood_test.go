package daemon

import (
	"net/netip"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
)

// TestForgedBeaconsDoNotFloodTheLog is issue 39 row 1: forged beacons
// from 4,000 addresses wrote a "server appeared" line each (23,800–29,900
// lines in 15 s), and their expiry a "server lost" line each. The daemon's
// log writes each message a bounded number of times per interval, then
// one summary with the count; the metric counts the lines not written.
func TestForgedBeaconsDoNotFloodTheLog(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	d, err := New(testConfig(t), Options{Logger: zap.New(core), Clock: clk, TestBounds: fast})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	const sources = 4000
	ev := func(kind beacon.EventKind, i int) beacon.Event {
		var g pva.GUID
		g[0], g[1], g[2] = 0xbb, byte(i>>8), byte(i)
		return beacon.Event{Kind: kind, GUID: g, Via: beacon.ViaBeacon, Protocol: "tcp", At: clk.Now(),
			Endpoint: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)}), 5075)}
	}
	for i := range sources {
		d.onBeaconEvent(ev(beacon.EventNew, i))
	}
	for i := range sources {
		d.onBeaconEvent(ev(beacon.EventLost, i))
	}
	// 8,000 events in one interval (the fake clock stood still).
	appeared, lost := logs.FilterMessage("server appeared").Len(), logs.FilterMessage("server lost").Len()
	const bound = 20 // limitlog.LinesPerInterval, as the docs promise
	if appeared > bound || lost > bound {
		t.Fatalf("%d \"server appeared\" and %d \"server lost\" lines for %d forged sources in one interval; want at most %d each",
			appeared, lost, sources, bound)
	}
	clk.Advance(10 * time.Second)
	var counted uint64
	for _, e := range logs.FilterMessage("repeated log lines not written").All() {
		counted += e.ContextMap()["not_written"].(uint64)
	}
	if want := uint64(2*sources - appeared - lost); counted != want {
		t.Errorf("summaries count %d lines not written, want %d", counted, want)
	}
	if got := metricValue(t, d, "pvans_log_lines_suppressed_total"); got != float64(2*sources-appeared-lost) {
		t.Errorf("pvans_log_lines_suppressed_total %v, want %d", got, 2*sources-appeared-lost)
	}
}

// metricValue is the value of the unlabelled metric name.
func metricValue(t *testing.T, d *Daemon, name string) float64 {
	t.Helper()
	fams, err := d.Metrics.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			m := f.GetMetric()[0]
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
