package perf

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/sim"
)

// TestPushLatency measures end-to-end figure (d) of docs/PERFORMANCE.md:
// the time from a new server's first beacon to a waiting TCP client's
// pushed answer. Each of PERF_PUSH_N rounds (default 50): the client (one
// connection for the whole run, as a PVXS client keeps its name-server
// connection) searches a name nobody holds; once pvans counts the waiter, a
// simulated server holding that name among PERF_PUSH_NAMES (default 1000)
// starts, sending its first beacon at once; the round's time runs from just
// before the server starts to the client holding the answer. The server
// then closes cleanly.
//
// What the time contains: the beacon reaching pvans, the tracker's "new",
// the probe (connect, handshake, `server` RPC op=channels listing every
// name), the registry replace, and the push to the waiting connection.
func TestPushLatency(t *testing.T) {
	requirePerf(t)
	rounds, names := envInt(t, "PERF_PUSH_N", 50), envInt(t, "PERF_PUSH_NAMES", 1000)
	t.Logf("load average %s, GOMAXPROCS %d", loadAvg(), runtime.GOMAXPROCS(0))
	p := startPVANS(t, "-discovery-at-start=false")
	c, err := nsclient.Dial(ctxTimeout(t, 10*time.Second), p.TCP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var lat []time.Duration
	for i := range rounds {
		set := sim.GenerateNames(100000+i, names, 30)
		want := set[len(set)/2]
		waiting := p.Metric("pvans_resolver_waiters")
		if err := c.Search([]string{want}); err != nil {
			t.Fatal(err)
		}
		if _, ok := p.waitMetric("pvans_resolver_waiters", func(v float64) bool { return v > waiting }, time.Millisecond, 10*time.Second); !ok {
			t.Fatalf("round %d: pvans never counted the waiter", i)
		}
		t0 := time.Now()
		site, err := sim.Start(context.Background(), sim.Options{Names: [][]string{set}, BeaconDests: []netip.AddrPort{p.UDP}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		answers, unresolved, err := c.Wait(ctx)
		d := time.Since(t0)
		cancel()
		guid := site.Server(0).GUID
		site.Close()
		if err != nil || len(unresolved) > 0 {
			t.Fatalf("round %d: %v, unresolved %v\n%s", i, err, unresolved, p.logTail())
		}
		if a := answers[len(answers)-1]; a.Name != want || a.GUID != guid {
			t.Fatalf("round %d: answer %+v, want %s from %s", i, a, want, guid)
		}
		lat = append(lat, d)
	}
	s := summarize(lat)
	t.Logf("first beacon → pushed answer, %d-name server: %v (load %s)", names, s, loadAvg())
	fmt.Printf("PUSH names=%d %v load=%q\n", names, s, loadAvg())
	if s.P99 >= time.Second {
		t.Logf("p99 %v MISSES the 1 s target", s.P99)
	}
}
