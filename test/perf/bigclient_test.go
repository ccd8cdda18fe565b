package perf

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/test/harness"
)

// TestBigClient is the big-client figure (docs/PERFORMANCE.md, "Big
// clients"): one client searching 100,000 names (10 simulated servers ×
// 10,000, names of 31 bytes on average) the way a PVXS client's search
// ring does (ringClient), against pvans at its default settings: over UDP
// to pvans, over UDP plus pvans as TCP name server, the same right after
// pvans restarted from its snapshot, and over TCP only (fewer names: the
// client's 64 KiB rule paces it to ~1,700 names a second whatever pvans
// does).
//
// It runs in CI (about 20 s) and checks what must not regress, in counts,
// not times: every name answered, no search of the client rate-limited
// while all it sent fits pvans' default bursts (checked from what it
// sent, not from how fast: a loaded machine makes the client search its
// names again, beyond the bursts, and whether pvans then limits some
// depends on the machine's speed — one run at load 6.7 had 531 limited,
// one at load 20 none, as a name searched again within 10 s costs a 64th
// of a new one, docs/SECURITY.md "Repeated searches", which
// TestJavaBurstNotLimitedAtDefaults checks in counts), and (over UDP)
// hardly any reply lost in the client's receive buffer;
// each would cost the client a re-search one ring tick (1 s) later. Times
// are logged, and so are the names searched again: the ring searches
// every name not answered within a tick again, so a burst larger than
// the client processes in a second is partly searched twice whatever
// pvans does.
// PVANS_PERF=1 adds the same client searching the servers directly (no
// name server) for comparison. PERF_BIG_SERVERS, PERF_BIG_NAMES,
// PERF_BIG_TCP_NAMES and PERF_BIG_DRAIN (names a second the client
// processes; default 60,000, a PVXS client's rate on an idle machine of
// the kind measured) change the figure.
func TestBigClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts pvans and 10 simulated servers")
	}
	servers, per := envInt(t, "PERF_BIG_SERVERS", 10), envInt(t, "PERF_BIG_NAMES", 10_000)
	tcpNames := envInt(t, "PERF_BIG_TCP_NAMES", 5_000)
	drain := float64(envInt(t, "PERF_BIG_DRAIN", 60_000))
	total := servers * per
	t.Logf("load average %s", loadAvg())

	udp, fanout := harness.FreePort(t), harness.FreePort(t)
	snap := filepath.Join(t.TempDir(), "registry.snapshot")
	start := func() *pvans {
		p := &pvans{t: t, Started: time.Now()}
		// Defaults, but for the beacon rate: every simulated server
		// beacons from 127.0.0.1, one sender.
		p.Pvans = harness.Start(t, harness.Options{UDPPort: udp, Args: []string{
			"--beacon-addr-list", "127.0.0.1", "--rate-limit-beacons-per-second", "0",
			"--addr-list", fmt.Sprintf("127.0.0.1:%d", fanout), "--snapshot-path", snap, "--log-level", "warn"}})
		return p
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := start()
	site, err := sim.Start(ctx, sim.Options{Servers: servers, NamesPerServer: per, NameLen: 31,
		UDPPort: fanout, BeaconDests: []netip.AddrPort{p.UDP}, UpdateInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	if _, ok := p.waitMetric("pvans_registry_names", func(v float64) bool { return v >= float64(total) },
		100*time.Millisecond, 60*time.Second); !ok {
		t.Fatalf("pvans holds %v of %d names after 60 s", p.Metric("pvans_registry_names"), total)
	}
	names := site.AllNames()

	type result struct {
		mode                           string
		names                          int
		last                           time.Duration
		udpSent, tcpSent, tcpSkipped   int64
		research, viaTCP, clientDrops  int64
		rateLimited, paced, replyDrops float64
		pairs, overTCP                 float64
	}
	// pvans' default bursts per source address (docs/operations.md,
	// rate_limit.*): a client that sent no more than these cannot be
	// limited, however slowly pvans read its searches.
	const udpSearchBurst, udpNameBurst, tcpMessageBurst = 10_000, 400_000, 2_000
	// runGuard ends a run that hangs; a run takes ~5 s on an idle
	// machine, and 66 s was seen at load 12 (the client's drain starved,
	// so it searched every name again four times).
	const runGuard = 240 * time.Second
	run := func(mode string, p *pvans, src netip.Addr, names []string, udpDests []netip.AddrPort, tcp bool) result {
		t.Helper()
		var ns []netip.AddrPort
		if tcp {
			ns = []netip.AddrPort{p.TCP}
		}
		before := map[string]float64{}
		if p != nil {
			before, _ = p.Metrics()
		}
		cctx, ccancel := context.WithTimeout(ctx, runGuard)
		defer ccancel()
		c, err := newRingClient(cctx, src, names, udpDests, ns, drain)
		if err != nil {
			t.Fatal(err)
		}
		ok := c.run(cctx)
		r := result{mode: mode, names: len(names), last: c.lastAnswer(), udpSent: c.udpSent.Load(),
			tcpSent: c.tcpSent.Load(), tcpSkipped: c.tcpSkip.Load(), research: c.research.Load(),
			viaTCP: c.viaTCP.Load(), clientDrops: c.drops}
		if p != nil {
			after, _ := p.Metrics()
			d := func(k string) float64 { return after[k] - before[k] }
			r.rateLimited = d(`pvans_udp_drops_total{reason="rate_limited"}`) + d(`pvans_tcp_limit_hits_total{limit="rate_limited"}`)
			r.paced = d("pvans_udp_replies_paced_total")
			r.replyDrops = d(`pvans_udp_drops_total{reason="reply_queue"}`) + d(`pvans_udp_drops_total{reason="reply_hold"}`)
			r.pairs = d("pvans_twin_pairs_made_total")
			r.overTCP = d("pvans_udp_replies_over_tcp_total") + d("pvans_udp_replies_diverted_total")
		}
		t.Logf("%-12s %6d names: last answer %6.2f s; datagrams %d, TCP searches %d (%d skipped by the 64 KiB rule); "+
			"names searched again %d, first answered over TCP %d; client receive drops %d; pvans rate-limited %.0f, replies paced %.0f, dropped %.0f; "+
			"pairs %.0f, UDP searches answered over TCP %.0f",
			mode, r.names, r.last.Seconds(), r.udpSent, r.tcpSent, r.tcpSkipped, r.research, r.viaTCP, r.clientDrops,
			r.rateLimited, r.paced, r.replyDrops, r.pairs, r.overTCP)
		if !ok {
			t.Errorf("%s: %d of %d names answered in %v", mode, r.names-int(c.left.Load()), r.names, runGuard)
		}
		return r
	}
	// limited checks that pvans limited none of a client that stayed
	// within its bursts; one that went beyond them (searching again on a
	// loaded machine) may be limited, as documented: logged.
	limited := func(r result) {
		t.Helper()
		within := r.udpSent <= udpSearchBurst && int64(r.names)+r.research <= udpNameBurst && r.tcpSent <= tcpMessageBurst
		switch {
		case r.rateLimited != 0 && within:
			t.Errorf("%s: pvans rate-limited %.0f searches of a client within its default bursts (%d datagrams, %d names, %d TCP searches)",
				r.mode, r.rateLimited, r.udpSent, int64(r.names)+r.research, r.tcpSent)
		case r.rateLimited != 0:
			t.Logf("%s: pvans rate-limited %.0f searches of a client beyond its default bursts (%d datagrams, %d names, %d TCP searches): the load made it search again",
				r.mode, r.rateLimited, r.udpSent, int64(r.names)+r.research, r.tcpSent)
		}
	}
	check := func(r result) {
		t.Helper()
		limited(r)
		// A regression shows as thousands: unpaced replies to a client
		// that drains as fast as a PVXS one lose ~5,800 of ~4,100 sent
		// (re-searches included, 1.4 per datagram) in its receive buffer.
		// An idle machine costs tens; one whose two cores are busy with
		// other work starves the simulated client's drain: up to 1,346
		// (0.26 per datagram) in one run, and 3,108 of 6,691 (0.46) at
		// load 20 with a CPU burner beside it, at the old bound of half
		// a drop per datagram. The bound is one drop per datagram sent:
		// below the regression's 1.4, and twice the worst load seen.
		if limit := r.udpSent; r.clientDrops > limit || r.clientDrops < 0 {
			t.Errorf("%s: the client's receive buffer dropped %d replies (limit %d)", r.mode, r.clientDrops, limit)
		}
	}

	// Each run searches from a source address of its own (or after a
	// restart), so each starts with full bursts. udp+tcp keeps
	// 127.0.0.1: its UDP socket pairs with its connection by address.
	lo, lo2 := netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.AddrFrom4([4]byte{127, 0, 0, 2})
	check(run("udp", p, lo2, names, []netip.AddrPort{p.UDP}, false))
	both := run("udp+tcp", p, lo, names, []netip.AddrPort{p.UDP}, true)
	check(both)
	// With a name server the client hurries up, and a reply lost in its
	// first 0.2 s costs it a ring revolution (6 s). pvans pairs its UDP
	// socket with its connection and answers over TCP: no reply lost.
	if both.pairs < 1 || both.overTCP == 0 {
		t.Errorf("udp+tcp: the client's socket was not paired with its connection (%.0f pairs, %.0f replies over TCP)", both.pairs, both.overTCP)
	}
	if both.replyDrops != 0 {
		t.Errorf("udp+tcp: pvans dropped %.0f replies to a client it could answer over TCP", both.replyDrops)
	}
	p.Stop()
	p = start()
	check(run("udp restart", p, lo, names, []netip.AddrPort{p.UDP}, false))
	r := run("tcp", p, lo, names[:min(tcpNames, len(names))], nil, true)
	limited(r)
	// ~47 searches of 37 names fit the 64 KiB of one tick.
	if r.names >= 4000 && r.tcpSkipped == 0 {
		t.Errorf("tcp: the 64 KiB rule never held a search back for %d names", r.names)
	}
	if os.Getenv("PVANS_PERF") == "1" {
		run("servers", nil, lo, names, []netip.AddrPort{site.UDPAddr()}, false)
	}
	if strings.Contains(p.Output(), `"level":"error"`) {
		t.Errorf("pvans logged errors:\n%s", p.logTail())
	}
}
