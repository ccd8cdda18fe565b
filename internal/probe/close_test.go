package probe

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/sim"
)

// blockingSink holds its Lost call until released, to catch a report
// delivered while (or after) the prober closes.
type blockingSink struct {
	*sink
	inLost  chan struct{}
	release chan struct{}
}

func (s *blockingSink) Lost(g pva.GUID, ep netip.AddrPort, reason string) {
	s.inLost <- struct{}{}
	<-s.release
	s.sink.Lost(g, ep, reason)
}

// Close returns only after every report already being delivered has
// returned, and nothing is reported after it: the owner's callbacks
// (logging, the registry) must not run after it has shut the prober down.
// A watch connection closed by the server just before Close used to
// deliver its Lost from the connection's goroutine after Close returned.
func TestCloseWaitsForReportsInFlight(t *testing.T) {
	srv := startServer(t, sim.Options{}, "x")
	k := &blockingSink{sink: newSink(), inLost: make(chan struct{}, 1), release: make(chan struct{})}
	p := New(withProduction(Options{Clock: clock.NewFake(time.Time{}), Sink: k}))
	p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
	k.next(t, "listed", 5*time.Second)
	srv.CloseConns()
	select {
	case <-k.inLost:
	case <-time.After(5 * time.Second):
		t.Fatal("no Lost delivered")
	}
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
		close(k.release)
		t.Fatal("Close returned while a Lost report was still being delivered")
	case <-time.After(200 * time.Millisecond):
	}
	close(k.release)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the report did")
	}
	k.next(t, "lost", time.Second)
	k.none(t, 200*time.Millisecond)
}
