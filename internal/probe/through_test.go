package probe

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/testutil"
)

// Hostile search-through answers, round after round, each naming fresh
// ports where nothing listens: the endpoints enter the table up to its
// bound, and each is forgotten after its retry budget, so the table never
// holds more than the bound and is empty once the answers stop. A server
// a beacon announced is never forgotten that way.
func TestSearchThroughEndpointsForgottenAndBounded(t *testing.T) {
	const (
		perRound = 300
		bound    = 200
		budget   = 3
	)
	c := clock.NewFake(time.Time{})
	refused := func(ctx context.Context, _ netip.AddrPort, _ pvaconn.Options, _ pvaconn.Handler) (*pvaconn.Conn, error) {
		return nil, &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}
	}
	k := &countSink{}
	p := newProber(t, Options{Clock: c, Sink: k, Dial: refused, Concurrency: 64, PerHostConcurrency: 64,
		ThroughRetries: budget, MaxThrough: bound})
	beaconed := netip.MustParseAddrPort("10.9.0.1:5075")
	p.Probe(pva.GUID{0xBE}, beaconed, ReasonNew)
	host := netip.MustParseAddr("10.9.9.9")
	port := 1000
	peak := 0
	idle := func() bool {
		for _, s := range p.Servers() {
			if s.State == StateProbing {
				return false
			}
		}
		return true
	}
	for round := range 10 {
		for range perRound {
			port++
			p.Probe(pva.GUID{0xE0, byte(round), byte(port >> 8), byte(port)}, netip.AddrPortFrom(host, uint16(port)), ReasonSearchThrough)
		}
		// Let the round's probes and their retries run: the backoff
		// (1, 2, 4 s …) on the fake clock, a few seconds a round.
		for range 4 {
			testutil.WaitFor(t, 10*time.Second, "probes to settle", idle)
			peak = max(peak, p.Stats().Servers)
			c.Advance(3 * time.Second)
		}
	}
	for range 10 {
		testutil.WaitFor(t, 10*time.Second, "probes to settle", idle)
		c.Advance(10 * time.Second)
	}
	testutil.WaitFor(t, 10*time.Second, "probes to settle", idle)
	st := p.Stats()
	t.Logf("peak %d servers in the table; after the rounds %d; forgotten %d, dropped %d", peak, st.Servers, p.stats.ThroughForgotten.Load(), p.stats.ThroughDropped.Load())
	if peak > bound+1 {
		t.Fatalf("table peaked at %d servers, want at most %d search-through endpoints plus the beaconed one", peak, bound)
	}
	ss := p.Servers()
	if len(ss) != 1 || ss[0].Endpoint != beaconed {
		t.Fatalf("after the rounds the table holds %d servers, want only the beaconed one", len(ss))
	}
	if p.stats.ThroughDropped.Load() == 0 || p.stats.ThroughForgotten.Load() == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// countSink counts reports and keeps nothing.
type countSink struct{}

func (countSink) Listed(pva.GUID, netip.AddrPort, []string, Info) {}
func (countSink) Unlistable(pva.GUID, netip.AddrPort, error)      {}
func (countSink) Lost(pva.GUID, netip.AddrPort, string)           {}

var _ = errors.New
