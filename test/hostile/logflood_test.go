package hostile

import (
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
)

// Issue 39 row 1, on the wire: forged beacons from 4,000 source
// addresses wrote a "server appeared" line each (23,800–29,900 lines in
// 15 s). Here 2,000 loopback addresses send one each: the log writes that
// message at most 20 times per 10 s (limitlog.LinesPerInterval), one
// summary line counts the rest, and so does the metric.
func TestLogFloodFromForgedSources(t *testing.T) {
	skipShort(t)
	const sources, perWindow, window = 2000, 20, 10 * time.Second
	tg := start(t, 0, "--log-level", "info", "--log-format", "json")
	begin := time.Now()
	for i := range sources {
		src := netip.AddrFrom4([4]byte{127, 77, byte(i >> 8), byte(i)})
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)))
		if err != nil {
			t.Fatal(err)
		}
		m := pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer,
			&pva.Beacon{GUID: pva.GUID{0xF1, 0x00, byte(i >> 8), byte(i)}, Addr: pva.AnyIPv4, Port: 5075, Protocol: "tcp"})
		_, err = c.WriteToUDPAddrPort(m, tg.UDP)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for tg.Metric(t, `pvans_beacon_events_total{kind="new"}`) < sources*9/10 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	appeared := func() int { return strings.Count(tg.Output(), `"msg":"server appeared"`) }
	n, took := appeared(), time.Since(begin)
	if bound := perWindow * (int(took/window) + 1); n > bound {
		t.Fatalf("%d \"server appeared\" lines in %s for %d forged sources; want at most %d", n, took.Round(time.Millisecond), sources, bound)
	}
	// The interval ends: a summary with the count, and the metric.
	var summarised float64
	for time.Now().Before(deadline.Add(window)) && summarised == 0 {
		for _, l := range strings.Split(tg.Output(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "repeated log lines not written" && m["message"] == "server appeared" {
				summarised += m["not_written"].(float64)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	suppressed := tg.Metric(t, "pvans_log_lines_suppressed_total")
	t.Logf("%d sources: %d \"server appeared\" lines, summaries count %v not written, pvans_log_lines_suppressed_total %v",
		sources, appeared(), summarised, suppressed)
	if summarised < sources*9/10-float64(perWindow*3) || suppressed < summarised {
		t.Errorf("summaries count %v lines not written, metric %v; want about %d", summarised, suppressed, sources-n)
	}
}
