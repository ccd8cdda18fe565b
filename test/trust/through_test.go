//go:build linux

package trust

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/test/harness"
)

// Hostile search-through answers, ten rounds: clients ask for names no
// server has, and an attacker on the server net answers every search
// (from its own address, so the answers pass the door) naming a fresh
// port of its own for each name, where nothing listens. Every answer adds
// an endpoint to probe; the prober keeps at most probe.DefaultMaxThrough
// of them and forgets each after its retry budget, so its table and the
// daemon's memory stay flat from round to round.
func TestHostileSearchThroughAnswersBounded(t *testing.T) {
	t.Parallel()
	const (
		rounds   = 10
		perRound = 1500
		bound    = 1024 // probe.DefaultMaxThrough
	)
	tp := newTopo(t)
	// The other tables the hostile names fill have bounds of their own:
	// insight's unresolved names are set to a fraction of one round here,
	// and the ring's channels and claims stop at
	// searchring.DefaultMaxChannels (10,000, a few MiB), so that the heap
	// measures the prober's table, not them filling up.
	tp.start(t, "--search-through", "--addr-list", "10.213.0.255:5076", "--log-level", "info",
		"--insight-names", "200")
	sniff := tp.searchListener(t)
	var out *net.UDPConn
	if err := tp.s.Do(func() (err error) {
		out, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(evilAddr, 0)))
		return
	}); err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	stop := make(chan struct{})
	answered := make(chan int, 1)
	go func() {
		// Answer every name of every search with a fresh port.
		buf := make([]byte, 65536)
		port, n := 10000, 0
		defer func() { answered <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			sniff.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			k, from, err := sniff.ReadFromUDPAddrPort(buf)
			if err != nil {
				continue
			}
			m, ok := decodeSearch(buf[:k])
			if !ok {
				continue
			}
			to := netip.AddrPortFrom(from.Addr(), m.ReplyPort)
			for _, q := range m.Names {
				port = 10000 + (port-10000+1)%50000
				g := pva.GUID{0xAA, byte(n >> 16), byte(n >> 8), byte(n)}
				out.WriteToUDPAddrPort(replyMsg(g, m.Seq, uint16(port), q.CID), to)
				n++
			}
		}
	}()
	pid := tp.pv.Proc.Cmd.Process.Pid
	var rss1 int64
	var heap []float64 // heap in use after each round (garbage included: averaged)
	for r := range rounds {
		names := make([]string, perRound)
		for i := range names {
			names[i] = fmt.Sprintf("hostile:r%d:%d", r, i)
		}
		_, _ = tp.pv.Query(names, 3*time.Second)
		eps, through := tp.metric(t, "pvans_probe_endpoints"), tp.metric(t, "pvans_probe_search_through_endpoints")
		rss := harness.RSS(pid)
		heap = append(heap, tp.metric(t, "go_memstats_heap_inuse_bytes"))
		if r == 0 {
			rss1 = rss
		}
		t.Logf("round %d: prober endpoints %.0f (search-through %.0f), failed probes %.0f, RSS %.1f MiB, heap in use %.1f MiB, goroutines %.0f",
			r+1, eps, through, tp.metric(t, `pvans_probe_total{result="failed"}`), float64(rss)/(1<<20),
			heap[r]/(1<<20), tp.metric(t, "go_goroutines"))
		if eps < 0 {
			t.Fatal("pvans_probe_endpoints is not exported: the bound cannot be read")
		}
		if eps > bound+10 {
			t.Fatalf("round %d: the prober holds %.0f endpoints, want at most %d", r+1, eps, bound)
		}
	}
	close(stop)
	n := <-answered
	rss := harness.RSS(pid)
	t.Logf("%d hostile answers; search-through endpoints dropped %.0f, forgotten %.0f; RSS %.1f → %.1f MiB", n,
		tp.metric(t, "pvans_probe_search_through_dropped_total"), tp.metric(t, "pvans_probe_search_through_forgotten_total"),
		float64(rss1)/(1<<20), float64(rss)/(1<<20))
	if n < 2*bound {
		t.Fatalf("only %d answers sent: the attack did not run", n)
	}
	// None of the named endpoints earned a place: no probe result of
	// theirs is shown (it would tell the sender what listens there).
	_, ev, err := tp.pv.Get("/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(ev), evilAddr.String()) {
		t.Fatalf("events show endpoints only a search reply named: %.300s", ev)
	}
	for _, sv := range tp.servers(t) {
		if strings.HasPrefix(sv.Endpoint, evilAddr.String()+":") {
			t.Fatalf("/v1/servers shows %+v, named only by a search reply", sv)
		}
	}
	// Forgotten means no longer tried: once the answers stop, the named
	// endpoints are tried until their retry budget is spent, then never
	// again (the table of an unbounded prober kept them and retried them
	// for ever, thousands of failures a minute). The last round's
	// endpoints spend their budgets first, at whatever pace the machine
	// allows: counting from before they had, on a loaded machine, counted
	// their budgeted retries as retries of forgotten endpoints.
	if _, ok := tp.pv.WaitMetric("pvans_probe_search_through_endpoints", func(v float64) bool { return v == 0 },
		100*time.Millisecond, 2*time.Minute); !ok {
		t.Fatalf("the prober still holds %.0f endpoints named only by search replies 2 minutes after the answers stopped",
			tp.metric(t, "pvans_probe_search_through_endpoints"))
	}
	failed := tp.metric(t, `pvans_probe_total{result="failed"}`)
	time.Sleep(10 * time.Second) // several backoff steps
	if after := tp.metric(t, `pvans_probe_total{result="failed"}`); after > failed+float64(bound)/10 {
		t.Errorf("failed probes went %.0f → %.0f in the 10 s after the attack stopped: endpoints named only by search replies are still tried", failed, after)
	}
	avg := func(v []float64) float64 { return (v[0] + v[1] + v[2]) / 3 }
	first, last := avg(heap[:3]), avg(heap[rounds-3:])
	t.Logf("heap in use, mean of rounds 1-3 %.1f MiB, of rounds 8-10 %.1f MiB", first/(1<<20), last/(1<<20))
	if last > first+16<<20 {
		t.Fatalf("heap in use grew %.1f MiB from the first rounds to the last, want the table bounded", (last-first)/(1<<20))
	}
}
