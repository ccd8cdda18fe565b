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
	p        *pvans   // set when the target is a pvans under test
	peer     *portPeer
	floor    bool // a wake-up floor (startFloors): UDP kinds only
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
	handled := float64(r.Messages - drops)
	m := measurement{target: t.name, value: handled / r.Seconds,
		extra: fmt.Sprintf("sent %.0f/s drops %d names/dgram %.1f", r.MessagesPerSec, drops, float64(r.Names)/float64(max(r.Messages, 1)))}
	if before != nil {
		if after, err := p.Metrics(); err == nil {
			d := func(k string) float64 { return after[k] - before[k] }
			m.extra += fmt.Sprintf(" pvans: searches %.0f forwards %.0f skipped %.0f rx_overflow %.0f", d("pvans_udp_searches_total"),
				d("pvans_udp_forwards_total"), d("pvans_udp_forwards_skipped_total"), d(`pvans_udp_drops_total{reason="rx_overflow"}`))
		}
	}
	if r.CPU != nil && handled > 0 {
		m.cpuUs = r.CPU.Seconds * 1e6 / handled
		m.extra += fmt.Sprintf(" cpu %.0f%%", 100*r.CPU.Utilization)
	}
	return m
}

// runUDPHit drives t with 38-name datagrams of names it holds (all found),
// up to window unanswered, as fast as replies come back: names found/s
// (claims/s) and target CPU per datagram.
func runUDPHit(tb testing.TB, t target, window int, dur time.Duration) measurement {
	tb.Helper()
	var before map[string]float64
	if t.p != nil {
		before, _ = t.p.Metrics()
	}
	r, err := bench.Run(context.Background(), bench.Config{
		Mode: bench.UDP, Target: t.udp, Hits: t.hits, HitFraction: 1,
		Window: window, Timeout: 50 * time.Millisecond, Duration: dur, PID: t.pid,
	})
	if err != nil {
		tb.Fatalf("%s udp: %v", t.name, err)
	}
	// Names found: a server that answers a name twice (PVXS's mailbox does
	// over loopback) finds it once.
	m := measurement{target: t.name, value: float64(min(r.Claims, r.Hits)) / r.Seconds,
		extra: fmt.Sprintf("%.0f dgrams/s replies/dgram %.2f unanswered %d claims/hits %d/%d", r.MessagesPerSec,
			float64(r.Replies)/float64(max(r.Messages, 1)), r.Timeouts, r.Claims, r.Hits)}
	// Unanswered searches of held names: pvans's drops, or servers of the
	// site it took for down (their names then go unanswered).
	if before != nil {
		if after, err := t.p.Metrics(); err == nil {
			d := func(k string) float64 { return after[k] - before[k] }
			var drops []string
			for k := range after {
				if strings.HasPrefix(k, "pvans_udp_drops_total") && d(k) > 0 {
					drops = append(drops, fmt.Sprintf("%s=%.0f", strings.TrimPrefix(k, "pvans_udp_drops_total"), d(k)))
				}
			}
			slices.Sort(drops)
			m.extra += fmt.Sprintf(" pvans: searches %.0f drops %v names %.0f servers_down %.0f", d("pvans_udp_searches_total"),
				drops, after["pvans_registry_names"], after["pvans_registry_servers_down"])
		}
	}
	if r.CPU != nil && r.Messages > 0 {
		m.cpuUs = r.CPU.PerMessageUs
		m.extra += fmt.Sprintf(" cpu %.0f%%", 100*r.CPU.Utilization)
	}
	return m
}

// runIdle is the target's CPU with no load at all (timers, beacons, echo
// with the site's servers): value = CPU µs per second, the share of the
// per-datagram CPU at low rates that is not the datagrams'.
func runIdle(tb testing.TB, t target, dur time.Duration) measurement {
	tb.Helper()
	before := runNs(tb, t.pid)
	time.Sleep(dur)
	used := float64(runNs(tb, t.pid)-before) / 1e3
	return measurement{target: t.name, value: used / dur.Seconds(), extra: "cpu µs/s"}
}

// runNs is the run time of every thread of pid (schedstat, ns).
func runNs(tb testing.TB, pid int) int64 {
	tb.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var total int64
	for _, e := range ents {
		if b, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat"); err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				total += n
			}
		}
	}
	return total
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

// TestThroughput measures end-to-end figures (a) and (b) of
// docs/PERFORMANCE.md against a pvans process holding PERF_SERVERS ×
// PERF_NAMES names (default 1 × 1000; 1000 × 1000 for the 1M figure), and,
// when PERF_CMP_UDP / PERF_CMP_TCP / PERF_CMP_PID name another PVA server
// (e.g. a PVXS mailbox holding the names in PERF_CMP_NAMES, which pvans
// then holds too when PERF_SERVERS=1; with more servers pvans keeps the
// site's own names), the same load against it, alternating target within each
// of PERF_REPEAT rounds (default 3) so each ratio comes from back-to-back
// runs. Each run lasts PERF_DUR (default 5 s).
//
// Run the test binary pinned to one CPU and set PERF_SERVER_CPU to the
// other (pvans is started under taskset); pin the comparison server there
// too.
//
// Figures (all-miss UDP: 38 names of 30 bytes a datagram, no reply):
//
//   - udp-flood: one sender as fast as it goes; handled datagrams/s =
//     (sent − kernel drops at the port) / s.
//
//   - udp-paced: PERF_UDP_RATE datagrams/s (default 20000): target CPU µs
//     per datagram below saturation.
//
//   - udp-paced:N: the same at N datagrams/s.
//
//   - udp-hit: 38 held names a datagram, up to PERF_HIT_WINDOW (64)
//     unanswered: names found/s (claims/s) and CPU per datagram.
//
// Both pvans and PVXS treat a datagram addressed to one of their own
// interface addresses (here 127.0.0.1) as unicast whatever its flags. PVXS
// forwards it to 224.0.0.128 over loopback and handles the looped copy, so
// each search costs it a forward pass and a lookup pass. pvans answers the
// original and forwards only while another socket shares its search port
// (the "+peer" variants; its own copy is then dropped unread).
//   - tcp-N: N connections pipelining 38-name searches of held names.
//
// PERF_VARIANTS lists the pvans processes (see below); every pvans variant
// is compared with the first and with the comparison server.
// PERF_FLOORS=1 adds the wake-up floors (startFloors) to the UDP kinds,
// each compared with the comparison server.
func TestThroughput(t *testing.T) {
	requirePerf(t)
	servers, names := envInt(t, "PERF_SERVERS", 1), envInt(t, "PERF_NAMES", 1000)
	repeat := envInt(t, "PERF_REPEAT", 3)
	dur := envDur(t, "PERF_DUR", 5*time.Second)
	rate := float64(envInt(t, "PERF_UDP_RATE", 20000))
	// PERF_HIT_WINDOW: udp-hit's datagrams in flight. On a loaded machine
	// each round trip waits for two scheduled processes, and 64 in flight
	// can hold the rate below what the server can answer (its CPU stays
	// idle); a larger window keeps its queue full.
	hitWindow := envInt(t, "PERF_HIT_WINDOW", 64)
	t.Logf("load average %s, GOMAXPROCS %d", loadAvg(), runtime.GOMAXPROCS(0))

	var cmpNames []string
	if f := os.Getenv("PERF_CMP_NAMES"); f != "" {
		cmpNames = readNameFile(t, f)
	}
	// PERF_VARIANTS: the pvans processes measured side by side, each on
	// its own ports: "pvans" (PVANS_BIN), any other NAME the binary in
	// PERF_NAME_BIN (e.g. "base", a build from before a change); a "+peer" suffix adds another socket on
	// that daemon's search port (portPeer), as a PVXS server on the same
	// host would be, so unicast searches must be forwarded.
	var targets []target
	var dests []netip.AddrPort
	for _, v := range strings.Split(envStr("PERF_VARIANTS", "pvans"), ",") {
		bin, peer := "", strings.HasSuffix(v, "+peer")
		if name := strings.TrimSuffix(v, "+peer"); name != "pvans" {
			env := "PERF_" + strings.ToUpper(name) + "_BIN"
			if bin = os.Getenv(env); bin == "" {
				t.Fatalf("variant %s needs %s", v, env)
			}
		}
		p := startPVANSBin(t, bin, 0, "-discovery-at-start=false")
		tg := target{name: v, udp: p.UDP, tcp: p.TCP, pid: p.PID(), p: p}
		if peer {
			tg.peer = startPortPeer(t, p.UDP.Port())
		}
		targets = append(targets, tg)
		dests = append(dests, p.UDP)
	}
	o := sim.Options{Servers: servers, NamesPerServer: names, NameLen: 30, BeaconDests: dests}
	// With one simulated server, pvans holds the comparison server's own
	// names (same names, same count). With more (e.g. 1000 × 1000), pvans
	// holds the site's generated names and searches among them, while the
	// comparison server is searched for the names in PERF_CMP_NAMES: the
	// "1M names held vs a PVXS server holding 20,000" figure.
	if cmpNames != nil && servers == 1 {
		o.Names = [][]string{cmpNames}
		names = len(cmpNames)
	}
	site, err := sim.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	for i := range targets {
		if _, ok := targets[i].p.waitMetric("pvans_registry_names", func(v float64) bool { return v >= float64(servers*names) }, 100*time.Millisecond, 180*time.Second); !ok {
			t.Fatalf("%s: registry not full", targets[i].name)
		}
		targets[i].hits = site.AllNames()
	}
	nPVANS := len(targets)
	if os.Getenv("PERF_FLOORS") == "1" {
		targets = append(targets, startFloors(t)...)
	}
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
	cmpName := "" // the comparison server, last of targets when given
	if os.Getenv("PERF_CMP_UDP") != "" {
		cmpName = targets[len(targets)-1].name
	}
	type key struct{ kind, target string }
	vals := map[key][]float64{}
	cpus := map[key][]float64{}
	// ratios[kind][target]: target vs the comparison server (cmp), and
	// each pvans variant vs the first (same round).
	ratios := map[key][]float64{}
	cpuRatios := map[key][]float64{}
	for rep := range repeat {
		for _, kind := range kinds {
			var got []measurement
			for _, tg := range targets {
				if tg.floor && !receiveOnly(kind) {
					continue // a floor only receives
				}
				var m measurement
				switch {
				case kind == "udp-flood":
					m = runUDP(t, tg, tg.p, 0, dur)
				case kind == "udp-paced":
					m = runUDP(t, tg, tg.p, rate, dur)
				case strings.HasPrefix(kind, "udp-paced:"): // udp-paced:RATE
					r, err := strconv.Atoi(strings.TrimPrefix(kind, "udp-paced:"))
					if err != nil || r <= 0 {
						t.Fatalf("kind %q", kind)
					}
					m = runUDP(t, tg, tg.p, float64(r), dur)
				case kind == "udp-hit":
					m = runUDPHit(t, tg, hitWindow, dur)
				case kind == "idle":
					m = runIdle(t, tg, dur)
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
				if tg.peer != nil {
					m.extra += fmt.Sprintf(" peer_received_total %d", tg.peer.received())
				}
				fmt.Printf("TPUT rep=%d %s %s size=%dx%d value=%.0f cpu_us=%.2f %s load=%q\n",
					rep, kind, tg.name, servers, names, m.value, m.cpuUs, m.extra, loadAvg())
				time.Sleep(500 * time.Millisecond) // let queues drain between runs
			}
			measured := got
			if cmpName != "" {
				measured = got[:len(got)-1]
			}
			for i, m := range measured {
				against := []measurement{}
				if cmpName != "" {
					against = append(against, got[len(got)-1])
				}
				if i > 0 && i < nPVANS {
					against = append(against, got[0])
				}
				for _, a := range against {
					if a.value > 0 && a.cpuUs > 0 {
						k := key{kind, m.target + "/" + a.target}
						ratios[k] = append(ratios[k], m.value/a.value)
						cpuRatios[k] = append(cpuRatios[k], m.cpuUs/a.cpuUs)
					}
				}
			}
		}
	}
	for _, kind := range kinds {
		line := fmt.Sprintf("MEDIAN %s size=%dx%d", kind, servers, names)
		for _, tg := range targets {
			if tg.floor && !receiveOnly(kind) {
				continue
			}
			k := key{kind, tg.name}
			line += fmt.Sprintf(" %s=%.0f/s (%.2f µs CPU)", tg.name, median(vals[k]), median(cpus[k]))
		}
		var rk []key
		for k := range ratios {
			if k.kind == kind {
				rk = append(rk, k)
			}
		}
		slices.SortFunc(rk, func(a, b key) int { return strings.Compare(a.target, b.target) })
		for _, k := range rk {
			line += fmt.Sprintf(" ratio %s rate %.2f cpu %.2f", k.target, median(ratios[k]), median(cpuRatios[k]))
		}
		t.Log(line)
		fmt.Println(line)
	}
}

// receiveOnly reports whether kind's load expects no answer, so a wake-up
// floor (which answers nothing) can take it.
func receiveOnly(kind string) bool {
	return kind == "udp-flood" || strings.HasPrefix(kind, "udp-paced")
}

func envStr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
