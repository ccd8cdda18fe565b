package perf

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/bench"
	"github.com/pvans-project/pvans/internal/sim"
)

// target is one server the throughput runs drive.
type target struct {
	name     string
	udp, tcp netip.AddrPort
	pid      int
	hits     []string // names it holds
	p        *pvans   // set when the target is the pvans under test
}

// measurement is one figure of one run.
type measurement struct {
	kind, target string
	value        float64 // the headline rate
	cpuUs        float64 // target CPU µs per handled datagram / message
	extra        string
}

// runUDP drives t with all-miss 38-name datagrams (names of 30 bytes).
// flood (rate 0): as fast as one sender goes, handled = sent − kernel drops
// at the target port; paced: rate datagrams/s, for CPU per datagram below
// saturation. p, when set, is the pvans behind t: its own counters
// cross-check the handled figure.
func runUDP(tb testing.TB, t target, p *pvans, rate float64, dur time.Duration) measurement {
	tb.Helper()
	var before map[string]float64
	if p != nil {
		before, _ = p.Metrics()
	}
	r, err := bench.Run(context.Background(), bench.Config{
		Mode: bench.UDP, Target: t.udp, HitFraction: 0, MissLen: 30,
		Window: 1 << 16, Timeout: 50 * time.Millisecond, Duration: dur, Rate: rate, PID: t.pid,
	})
	if err != nil {
		tb.Fatalf("%s udp: %v", t.name, err)
	}
	drops := int64(0)
	if r.TargetDrops != nil {
		drops = *r.TargetDrops
	}
	if r.Replies != 0 {
		tb.Fatalf("%s answered %d all-miss searches", t.name, r.Replies)
	}
	// Both copies of a search (as sent, and forwarded back over the
	// loopback group) arrive on the port; losing either loses the search.
	handled := float64(r.Messages - drops)
	m := measurement{target: t.name, value: handled / r.Seconds,
		extra: fmt.Sprintf("sent %.0f/s drops %d names/dgram %.1f", r.MessagesPerSec, drops, float64(r.Names)/float64(max(r.Messages, 1)))}
	if before != nil {
		if after, err := p.Metrics(); err == nil {
			d := func(k string) float64 { return after[k] - before[k] }
			m.extra += fmt.Sprintf(" pvans: searches %.0f forwards %.0f rx_overflow %.0f", d("pvans_udp_searches_total"),
				d("pvans_udp_forwards_total"), d(`pvans_udp_drops_total{reason="rx_overflow"}`))
		}
	}
	if r.CPU != nil && handled > 0 {
		m.cpuUs = r.CPU.Seconds * 1e6 / handled
		m.extra += fmt.Sprintf(" cpu %.0f%%", 100*r.CPU.Utilization)
	}
	return m
}

// runTCP drives t with 38-name searches of names it holds over conns
// connections (window 64 each): claims/s.
func runTCP(tb testing.TB, t target, conns int, dur time.Duration) measurement {
	tb.Helper()
	r, err := bench.Run(context.Background(), bench.Config{
		Mode: bench.TCP, Target: t.tcp, Hits: t.hits, HitFraction: 1, Conns: conns,
		Window: 64, Duration: dur, Timeout: 2 * time.Second, PID: t.pid,
	})
	if err != nil {
		tb.Fatalf("%s tcp: %v", t.name, err)
	}
	if r.Claims != r.Hits {
		tb.Logf("%s tcp %d conns: %d claims for %d hits (%d unanswered)", t.name, conns, r.Claims, r.Hits, r.Timeouts)
	}
	m := measurement{target: t.name, value: r.ClaimsPerSec,
		extra: fmt.Sprintf("%.0f msgs/s replies/msg %.2f p50 %.0fµs p99 %.0fµs", r.MessagesPerSec,
			float64(r.Replies)/float64(max(r.Messages, 1)), r.Latency.P50us, r.Latency.P99us)}
	if r.CPU != nil && r.Messages > 0 {
		m.cpuUs = r.CPU.PerMessageUs
		m.extra += fmt.Sprintf(" cpu %.0f%%", 100*r.CPU.Utilization)
	}
	return m
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func readNameFile(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// TestThroughput measures issue 8 (a) and (b) against a pvans process
// holding PERF_SERVERS × PERF_NAMES names (default 1 × 1000; 1000 × 1000
// for the 1M figure), and, when PERF_CMP_UDP / PERF_CMP_TCP / PERF_CMP_PID
// name another PVA server (e.g. a PVXS mailbox holding the names in
// PERF_CMP_NAMES, which pvans then holds too), the same load against it,
// alternating target within each of PERF_REPEAT rounds (default 3) so each
// ratio comes from back-to-back runs. Each run lasts PERF_DUR (default 5 s).
//
// Run the test binary pinned to one CPU and set PERF_SERVER_CPU to the
// other (pvans is started under taskset); pin the comparison server there
// too.
//
// Figures (all-miss UDP: 38 names of 30 bytes a datagram, no reply):
//   - udp-flood: one sender as fast as it goes; handled datagrams/s =
//     (sent − kernel drops at the port) / s.
//   - udp-paced: PERF_UDP_RATE datagrams/s (default 20000): target CPU µs
//     per datagram below saturation.
//
// Both pvans and PVXS treat a datagram addressed to one of their own
// interface addresses (here 127.0.0.1) as unicast whatever its flags: they
// forward it to 224.0.0.128 over loopback and handle the looped copy, so
// each search costs both a forward pass and a lookup pass.
//   - tcp-N: N connections pipelining 38-name searches of held names.
func TestThroughput(t *testing.T) {
	requirePerf(t)
	servers, names := envInt(t, "PERF_SERVERS", 1), envInt(t, "PERF_NAMES", 1000)
	repeat := envInt(t, "PERF_REPEAT", 3)
	dur := envDur(t, "PERF_DUR", 5*time.Second)
	rate := float64(envInt(t, "PERF_UDP_RATE", 20000))
	t.Logf("load average %s, GOMAXPROCS %d", loadAvg(), runtime.GOMAXPROCS(0))

	var cmpNames []string
	if f := os.Getenv("PERF_CMP_NAMES"); f != "" {
		cmpNames = readNameFile(t, f)
	}
	p := startPVANS(t, "-discovery-at-start=false")
	o := sim.Options{Servers: servers, NamesPerServer: names, NameLen: 30, BeaconDests: []netip.AddrPort{p.UDP}}
	if cmpNames != nil {
		if servers != 1 {
			t.Fatal("PERF_CMP_NAMES needs PERF_SERVERS=1")
		}
		o.Names = [][]string{cmpNames}
		names = len(cmpNames)
	}
	site, err := sim.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	if _, ok := p.waitMetric("pvans_registry_names", func(v float64) bool { return v >= float64(servers*names) }, 100*time.Millisecond, 180*time.Second); !ok {
		t.Fatalf("registry not full")
	}
	targets := []target{{name: "pvans", udp: p.UDP, tcp: p.TCP, pid: p.PID(), hits: site.AllNames(), p: p}}
	if u := os.Getenv("PERF_CMP_UDP"); u != "" {
		c := target{name: "cmp", hits: cmpNames}
		var err error
		if c.udp, err = netip.ParseAddrPort(u); err != nil {
			t.Fatal(err)
		}
		if c.tcp, err = netip.ParseAddrPort(os.Getenv("PERF_CMP_TCP")); err != nil {
			t.Fatal(err)
		}
		if c.pid, err = strconv.Atoi(os.Getenv("PERF_CMP_PID")); err != nil {
			t.Fatal(err)
		}
		if len(c.hits) == 0 {
			t.Fatal("PERF_CMP_NAMES: the comparison server's names are needed for TCP")
		}
		targets = append(targets, c)
	}
	kinds := strings.Split(envStr("PERF_KINDS", "udp-flood,udp-paced,tcp-1,tcp-10,tcp-100"), ",")
	type key struct{ kind, target string }
	vals := map[key][]float64{}
	cpus := map[key][]float64{}
	ratios := map[string][]float64{}
	cpuRatios := map[string][]float64{}
	for rep := range repeat {
		for _, kind := range kinds {
			var got []measurement
			for _, tg := range targets {
				var m measurement
				switch {
				case kind == "udp-flood":
					m = runUDP(t, tg, tg.p, 0, dur)
				case kind == "udp-paced":
					m = runUDP(t, tg, tg.p, rate, dur)
				case strings.HasPrefix(kind, "tcp-"):
					n, err := strconv.Atoi(strings.TrimPrefix(kind, "tcp-"))
					if err != nil {
						t.Fatalf("kind %q", kind)
					}
					m = runTCP(t, tg, n, dur)
				default:
					t.Fatalf("unknown kind %q", kind)
				}
				m.kind = kind
				k := key{kind, tg.name}
				vals[k] = append(vals[k], m.value)
				cpus[k] = append(cpus[k], m.cpuUs)
				got = append(got, m)
				fmt.Printf("TPUT rep=%d %s %s size=%dx%d value=%.0f cpu_us=%.2f %s load=%q\n",
					rep, kind, tg.name, servers, names, m.value, m.cpuUs, m.extra, loadAvg())
				time.Sleep(500 * time.Millisecond) // let queues drain between runs
			}
			if len(got) == 2 && got[1].value > 0 && got[1].cpuUs > 0 {
				ratios[kind] = append(ratios[kind], got[0].value/got[1].value)
				cpuRatios[kind] = append(cpuRatios[kind], got[0].cpuUs/got[1].cpuUs)
			}
		}
	}
	for _, kind := range kinds {
		line := fmt.Sprintf("MEDIAN %s size=%dx%d", kind, servers, names)
		for _, tg := range targets {
			k := key{kind, tg.name}
			line += fmt.Sprintf(" %s=%.0f/s (%.2f µs CPU)", tg.name, median(vals[k]), median(cpus[k]))
		}
		if r := ratios[kind]; len(r) > 0 {
			line += fmt.Sprintf(" ratio pvans/cmp rate %.2f cpu %.2f", median(r), median(cpuRatios[kind]))
		}
		t.Log(line)
		fmt.Println(line)
	}
}

func envStr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
