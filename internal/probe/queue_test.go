package probe

import (
	"context"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/testutil"
)

// forgedRows is the registry's bound on servers (registry.max_servers),
// the number of rows forged beacons can make the prober hold.
const forgedRows = 20000

// Probes waiting for a slot of the pool are data, not goroutines: 20,000
// servers named by forged beacons whose endpoints never answer cost the
// pool's goroutines (one per slot), however many wait. Forgetting them
// (beacon expiry, eviction) empties the queue.
func TestWaitingProbesHoldNoGoroutine(t *testing.T) {
	hold := make(chan struct{})
	dialling := make(chan struct{}, forgedRows)
	dial := func(ctx context.Context, _ netip.AddrPort, _ pvaconn.Options, _ pvaconn.Handler) (*pvaconn.Conn, error) {
		dialling <- struct{}{}
		select { // an endpoint that never answers
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-hold:
			return nil, context.Canceled
		}
	}
	// No probe times out while the test looks: under load, making 20,000
	// requests can take longer than the production first timeout (5 s),
	// after which the first probes fail, the next ones dial and the pool
	// is never seen full with the rest waiting.
	p := newProber(t, Options{Clock: clock.NewFake(time.Time{}), Sink: newSink(), Dial: dial,
		ProbeTimeout: time.Hour, FirstTimeout: time.Hour})
	defer close(hold)
	base := runtime.NumGoroutine()
	eps := make([]netip.AddrPort, forgedRows)
	for i := range eps {
		eps[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)}), 5075)
		p.Probe(pva.GUID{0xba, byte(i >> 8), byte(i)}, eps[i], ReasonNew)
	}
	conc := withProduction(Options{}).Concurrency
	testutil.WaitFor(t, 10*time.Second, "the pool full, the rest waiting", func() bool {
		return len(dialling) == conc && p.Stats().Waiting == forgedRows-conc
	})
	st := p.Stats()
	if st.Servers != forgedRows {
		t.Fatalf("servers %d, want %d", st.Servers, forgedRows)
	}
	// The pool's probes, and a little slack for the runtime's own.
	if g := runtime.NumGoroutine() - base; g > conc+20 {
		t.Errorf("%d goroutines for %d servers (%d probing, %d waiting), want at most the pool's %d and a few", g, forgedRows, conc, st.Waiting, conc)
	}
	for _, ep := range eps {
		p.Forget(ep)
	}
	testutil.WaitFor(t, 10*time.Second, "the queue empty", func() bool {
		st := p.Stats()
		return st.Waiting == 0 && st.Servers == 0
	})
	testutil.WaitFor(t, 10*time.Second, "the probes' goroutines end", func() bool { return runtime.NumGoroutine() <= base+5 })
}
