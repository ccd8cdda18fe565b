package probe

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// closedReason: the reasons of a server's close (a close with our echo
// unread is a reset).
var closedReason = map[string]bool{"connection closed by server": true, "connection reset by server": true}

// A watch that dies around a re-listing is one loss, whichever of the
// re-listing's settle and the connection's connClosed takes the prober's
// lock first. Here settle comes first (connClosed is held back): it used
// to count the dead watch as one more failure and drop it, so connClosed
// found nothing to report and a static server gone for good kept its
// names for ever.
func TestWatchDeathSettledFirstIsLost(t *testing.T) {
	srv := startServer(t, sim.Options{}, "st:a")
	k := newSink()
	c := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: c, Sink: k})
	closing, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the prober's Close: cleanups run last first
	p.onClosed = func(*client) {
		select {
		case closing <- struct{}{}:
		default:
		}
		<-release
	}
	p.SetStatic([]netip.AddrPort{srv.Addr()})
	g, ep := srv.GUID(), srv.Addr()
	if r := k.next(t, "listed", 5*time.Second); r.guid != g {
		t.Fatalf("listed %+v", r)
	}
	srv.Close() // gone for good: only its watch can tell
	select {
	case <-closing:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not close")
	}
	// The periodic re-listing runs on the dead watch and settles while
	// the watch's own connClosed waits.
	c.Advance(p.Servers()[0].NextAttempt.Sub(c.Now()))
	testutil.WaitFor(t, 5*time.Second, "the re-listing to settle", func() bool { return p.stats.ConnectFailures.Load() == 1 })
	free()
	if r := k.next(t, "lost", 2*time.Second); r.guid != g || r.ep != ep || !closedReason[r.reason] {
		t.Fatalf("lost %+v", r)
	}
	k.none(t, 200*time.Millisecond)
	if p.stats.Lost.Load() != 1 || !p.Gone(ep) {
		t.Fatalf("lost %d times, gone %v", p.stats.Lost.Load(), p.Gone(ep))
	}
}
