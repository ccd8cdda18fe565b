package perf

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/test/harness"
)

// TestFill measures end-to-end figure (c) of docs/PERFORMANCE.md: how long
// pvans takes to discover and probe PERF_SERVERS × PERF_NAMES names
// (default 1000 × 1000, mean name length 30) from scratch, and its memory
// once full.
//
//   - site start: pvans is running and empty; every simulated server starts
//     and sends its first beacon; t0 is just before the site starts.
//   - pvans start: the site is running; a fresh pvans (no snapshot) starts
//     on the same port (so it hears the servers' next beacons) with the
//     site's fan-out port in its address list, so its discovery ping
//     reaches every server; t0 is just before exec. The names held 30 s
//     after start are reported too.
//
// Heap per name is (heap in use when full − heap in use empty) / names.
// With PERF_SETTLE (e.g. 130s) it waits that long once full and scrapes
// again: Go forces a GC after two idle minutes, so the second figure is
// close to the live heap.
func TestFill(t *testing.T) {
	requirePerf(t)
	servers, names := envInt(t, "PERF_SERVERS", 1000), envInt(t, "PERF_NAMES", 1000)
	settle := envDur(t, "PERF_SETTLE", 0)
	total := float64(servers * names)
	fanout := harness.FreePort(t)
	t.Logf("load average %s, GOMAXPROCS %d", loadAvg(), runtime.GOMAXPROCS(0))

	// Phase 1: site start against a running, empty pvans.
	p := startPVANS(t, "-discovery-at-start=false")
	time.Sleep(time.Second) // let start-up garbage settle
	empty, err := p.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Now()
	site, err := sim.Start(ctx, sim.Options{Servers: servers, NamesPerServer: names, NameLen: 30,
		UDPPort: fanout, BeaconDests: []netip.AddrPort{p.UDP}})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	simUp := time.Since(t0)
	report := func(phase string, p *pvans, t0 time.Time) {
		t.Helper()
		at, ok := p.waitMetric("pvans_registry_names", func(v float64) bool { return v >= total }, 100*time.Millisecond, time.Until(t0.Add(30*time.Second)))
		if !ok {
			t.Logf("%s: %.0f of %.0f names 30 s after start (load %s); waiting up to 200 s more for beacons",
				phase, p.Metric("pvans_registry_names"), total, loadAvg())
			at, ok = p.waitMetric("pvans_registry_names", func(v float64) bool { return v >= total }, 100*time.Millisecond, 200*time.Second)
		}
		if !ok {
			t.Fatalf("%s: registry has %.0f of %.0f names after 230 s\n%s", phase, p.Metric("pvans_registry_names"), total, p.logTail())
		}
		fill := at.Sub(t0)
		m, err := p.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		heap, base := m["go_memstats_heap_inuse_bytes"], empty["go_memstats_heap_inuse_bytes"]
		t.Logf("%s: %.0f names, %.0f servers in %.2f s (load %s); probes ok %.0f failed %.0f",
			phase, m["pvans_registry_names"], m["pvans_registry_servers"], fill.Seconds(), loadAvg(),
			m[`pvans_probe_total{result="ok"}`], m[`pvans_probe_total{result="failed"}`])
		t.Logf("%s: pvans UDP sockets: %s", phase, udpDrops(p.PID()))
		// Which way the servers were found, and what the daemon itself counted
		// as kernel drops on the search port and on its client socket (the
		// one discovery replies arrive on).
		t.Logf("%s: sightings via discovery %.0f, via beacon %.0f; drops rx_overflow %.0f, client_rx_overflow %.0f",
			phase, m[`pvans_beacons_total{via="discovery"}`], m[`pvans_beacons_total{via="beacon"}`],
			m[`pvans_udp_drops_total{reason="rx_overflow"}`], m[`pvans_udp_drops_total{reason="client_rx_overflow"}`])
		t.Logf("%s: RSS %s (process_resident_memory_bytes %s), heap in use %s (empty %s): %.0f B/name; heap alloc %s",
			phase, mib(rssBytes(p.PID())), mib(m["process_resident_memory_bytes"]), mib(heap), mib(base),
			(heap-base)/total, mib(m["go_memstats_heap_alloc_bytes"]))
		if settle > 0 {
			time.Sleep(settle)
			m, err := p.Metrics()
			if err != nil {
				t.Fatal(err)
			}
			heap = m["go_memstats_heap_inuse_bytes"]
			t.Logf("%s +%v: RSS %s, heap in use %s: %.0f B/name; heap alloc %s, GCs %.0f", phase, settle,
				mib(m["process_resident_memory_bytes"]), mib(heap), (heap-base)/total, mib(m["go_memstats_heap_alloc_bytes"]),
				m["go_gc_duration_seconds_count"])
		}
		fmt.Printf("FILL %s servers=%d names=%d fill_s=%.2f rss_mib=%.1f heap_mib=%.1f heap_per_name_b=%.0f discovery=%.0f client_rx_overflow=%.0f load=%q\n",
			phase, servers, names, fill.Seconds(), m["process_resident_memory_bytes"]/(1<<20), heap/(1<<20), (heap-base)/total,
			m[`pvans_beacons_total{via="discovery"}`], m[`pvans_udp_drops_total{reason="client_rx_overflow"}`], loadAvg())
	}
	t.Logf("site of %d servers up in %.2f s", servers, simUp.Seconds())
	report("site-start", p, t0)
	p.Stop()

	// Phase 2: a fresh pvans finds the running site by its discovery ping.
	p2 := startPVANSOn(t, p.UDP.Port(), "-addr-list", fmt.Sprintf("127.0.0.1:%d", fanout))
	report("pvans-start", p2, p2.Started)
}
