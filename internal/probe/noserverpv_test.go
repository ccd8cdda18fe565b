package probe

import (
	"errors"
	"math"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/sim"
)

// settleNoServerPV lets the attempt running at srv end: once the server
// answered the echo after the CREATE_CHANNEL (the grace timer is the fake
// clock's one pending timer), the grace passes.
func settleNoServerPV(t *testing.T, c *clock.Fake) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); c.Pending() != 1 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	c.Advance(ServerPVGrace)
}

// A server with no `server` PV that never answers its CREATE_CHANNEL
// (Phoebus core-pva's Java server) is unlistable as soon as it has answered
// the request sent after it, not a timeout after the probe's deadline; its
// watch connection stays up, so it is kept and still watched.
func TestNoServerPVUnlistableAtOnce(t *testing.T) {
	srv := startServer(t, sim.Options{Java: true}, "java:a")
	k := newSink()
	c := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: c, Sink: k})
	p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
	settleNoServerPV(t, c)
	r := k.next(t, "unlistable", 3*time.Second) // the probe's deadline is 5 s
	var le *ListError
	if cat := Category(r.err); cat != FailUnlistable || !errors.As(r.err, &le) || !errors.Is(r.err, errNoServerPV) {
		t.Fatalf("err %v (%s), want unlistable: no `server` PV", r.err, cat)
	}
	if st := p.Servers(); len(st) != 1 || st[0].State != StateUnlistable || !st[0].Connected {
		t.Fatalf("status %+v, want unlistable and watched", st)
	}
	if g, ok := p.Watching(srv.Addr()); !ok || g != srv.GUID() {
		t.Fatalf("watching %v %v", g, ok)
	}
	if n := srv.site.Server(0).UnknownCreates; n != 1 {
		t.Fatalf("%d CREATE_CHANNEL warnings in the server's log, want 1", n)
	}
	srv.CloseConns()
	if r := k.next(t, "lost", 2*time.Second); r.guid != srv.GUID() {
		t.Fatalf("lost %+v", r)
	}
}

// An unlistable server is retried on a schedule that doubles from a
// minute to hours, not every probe.DefaultBackoffMax: each attempt at a Java
// server is a WARNING in its log. Hints (a discovery reply, a
// search-through answer) for it while its watch is up wait for that
// schedule.
func TestUnlistableRetriesBackOffToHours(t *testing.T) {
	srv := startServer(t, sim.Options{Java: true}, "java:a")
	k := newSink()
	c := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: c, Sink: k})
	scheds := make(chan time.Duration, 100)
	p.onSchedule = func(_ netip.AddrPort, d time.Duration, _ int) { scheds <- d }
	p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
	var got []time.Duration
	for i := 0; ; i++ {
		settleNoServerPV(t, c)
		k.next(t, "unlistable", 3*time.Second)
		var d time.Duration
		select {
		case d = <-scheds:
		case <-time.After(3 * time.Second):
			t.Fatal("no retry scheduled")
		}
		got = append(got, d)
		if i == 0 {
			// Hints meanwhile probe nothing.
			for range 3 {
				p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
				p.Probe(srv.GUID(), srv.Addr(), ReasonSearchThrough)
			}
			k.none(t, 50*time.Millisecond)
			if n := srv.site.Server(0).UnknownCreates; n != 1 {
				t.Fatalf("hints made %d CREATE_CHANNELs, want the first only", n)
			}
		}
		if d >= UnlistableRetryMax || i > 20 {
			break
		}
		c.Advance(d)
	}
	want := UnlistableRetryMin
	for i, d := range got {
		if d != min(want, UnlistableRetryMax) {
			t.Fatalf("retry %d after %v, want %v (all: %v)", i+1, d, min(want, UnlistableRetryMax), got)
		}
		want *= 2
	}
	if n := srv.site.Server(0).UnknownCreates; n != len(got) || srv.Accepted() != 1 {
		t.Fatalf("%d CREATE_CHANNELs on %d connections, want %d on one", n, srv.Accepted(), len(got))
	}
	if p.stats.HintsDeferred.Load() < 6 {
		t.Fatalf("hints deferred %d, want 6", p.stats.HintsDeferred.Load())
	}
}

// A Java server answers a TCP search one name a reply: every claimed name
// is confirmed, not only the first reply's; and its CIDs are ones it
// claims (positive as Java ints).
func TestConfirmJavaServer(t *testing.T) {
	srv := startServer(t, sim.Options{Java: true}, "j:a", "j:b", "j:c")
	p := newProber(t, Options{Clock: clock.NewFake(time.Time{}), Sink: newSink()})
	ch := make(chan []string, 1)
	p.Confirm(srv.GUID(), srv.Addr(), []string{"j:a", "nope", "j:b", "j:c"}, func(ok []string) { ch <- ok })
	var ok []string
	select {
	case ok = <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("Confirm never finished")
	}
	slices.Sort(ok)
	if !slices.Equal(ok, []string{"j:a", "j:b", "j:c"}) {
		t.Fatalf("confirmed %v, want j:a j:b j:c", ok)
	}
}

// The IDs a probe connection picks (the `server` channel's CID, RPC IOIDs)
// stay positive as Java ints, for the months a watch connection lives.
func TestProbeIDsPositive(t *testing.T) {
	cl := newClient(New(Options{}), &server{})
	cl.nextID = math.MaxInt32 - 2
	for range 5 {
		if id := cl.id(); int32(id) <= 0 {
			t.Fatalf("id %#x: negative or zero as a Java int", id)
		}
	}
}

// A Java server answers no TCP ping (a search without names), but answers
// a name searched with a negative CID with its GUID: a server named with
// no GUID (the static list) is reported under the GUID it proved over
// TCP, not a synthetic one.
func TestNoServerPVGUIDProvenOverTCP(t *testing.T) {
	srv := startServer(t, sim.Options{Java: true}, "java:a")
	k := newSink()
	c := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: c, Sink: k})
	p.SetStatic([]netip.AddrPort{srv.Addr()})
	settleNoServerPV(t, c)
	if r := k.next(t, "unlistable", 3*time.Second); r.guid != srv.GUID() {
		t.Fatalf("reported under %v, want the server's GUID %v (static: %v)", r.guid, srv.GUID(), StaticGUID(srv.Addr()))
	}
}
