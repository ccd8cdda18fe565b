package probe

import (
	"context"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// Zero Options are no bound, no timeout and off (the daemon passes its
// settings through Apply): every probe runs at once and without a
// deadline, endpoints known only from search replies are neither bounded
// nor forgotten, a failed probe is not retried on a timer and a listed
// server is not re-listed, until Apply gives the prober a backoff.
func TestZeroOptionsAreOff(t *testing.T) {
	const n = 1100 // beyond every production bound of the pool and of search-through
	c := clock.NewFake(time.Time{})
	var dialling, deadlines, scheduled atomic.Int32
	gate := make(chan struct{})
	dial := func(ctx context.Context, _ netip.AddrPort, _ pvaconn.Options, _ pvaconn.Handler) (*pvaconn.Conn, error) {
		if _, ok := ctx.Deadline(); ok {
			deadlines.Add(1)
		}
		dialling.Add(1)
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return nil, &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}
	}
	p := New(Options{Clock: c, Sink: countSink{}, Dial: dial, Rand: rand.New(rand.NewPCG(1, 2))})
	t.Cleanup(p.Close)
	p.onSchedule = func(netip.AddrPort, time.Duration, int) { scheduled.Add(1) }
	host := netip.MustParseAddr("10.9.9.9")
	ep := func(i int) netip.AddrPort { return netip.AddrPortFrom(host, uint16(1000+i)) }
	for i := range n {
		p.Probe(pva.GUID{0xE0, byte(i >> 8), byte(i)}, ep(i), ReasonSearchThrough)
	}
	testutil.WaitFor(t, 10*time.Second, "every probe of one host dialling at once", func() bool { return dialling.Load() == n })
	close(gate)
	idle := func() bool {
		for _, s := range p.Servers() {
			if s.State == StateProbing {
				return false
			}
		}
		return true
	}
	testutil.WaitFor(t, 10*time.Second, "probes to settle", idle)
	c.Advance(24 * time.Hour)
	st := p.Stats()
	if d := deadlines.Load(); d != 0 {
		t.Errorf("%d probes had a deadline without a ProbeTimeout", d)
	}
	if st.Servers != n || p.stats.ThroughDropped.Load() != 0 || p.stats.ThroughForgotten.Load() != 0 {
		t.Errorf("stats %+v: want every search-through endpoint kept", st)
	}
	if s := scheduled.Load(); s != 0 || p.stats.Probes.Load() != n {
		t.Errorf("%d retries scheduled, %d probes, without a backoff: want none beyond the first %d", s, p.stats.Probes.Load(), n)
	}

	p.Apply(Timings{Backoff: Backoff{Min: time.Second}})
	p.Probe(pva.GUID{0xE0}, ep(0), ReasonManual)
	testutil.WaitFor(t, 10*time.Second, "a retry scheduled once Apply gave a backoff", func() bool { return scheduled.Load() == 1 })

	srv := startServer(t, sim.Options{}, "x")
	k := newSink()
	p2 := New(Options{Clock: clock.NewFake(time.Time{}), Sink: k})
	t.Cleanup(p2.Close)
	p2.Probe(srv.GUID(), srv.Addr(), ReasonManual)
	k.next(t, "listed", 5*time.Second)
	if s := p2.Servers(); len(s) != 1 || !s[0].NextAttempt.IsZero() {
		t.Fatalf("servers %+v: want one listed, no re-listing without a Reprobe", s)
	}
}
