package probe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// --- recording sink -------------------------------------------------------

type report struct {
	kind   string // listed, unlistable, lost
	guid   pva.GUID
	ep     netip.AddrPort
	names  []string
	info   Info
	err    error
	reason string
	at     time.Time
}

type sink struct{ ch chan report }

func newSink() *sink { return &sink{ch: make(chan report, 100)} }

func (s *sink) Listed(g pva.GUID, ep netip.AddrPort, names []string, info Info) {
	s.ch <- report{kind: "listed", guid: g, ep: ep, names: names, info: info, at: time.Now()}
}
func (s *sink) Unlistable(g pva.GUID, ep netip.AddrPort, err error) {
	s.ch <- report{kind: "unlistable", guid: g, ep: ep, err: err, at: time.Now()}
}
func (s *sink) Lost(g pva.GUID, ep netip.AddrPort, reason string) {
	s.ch <- report{kind: "lost", guid: g, ep: ep, reason: reason, at: time.Now()}
}

// next is the next report, which must be of kind ("": any kind).
func (s *sink) next(t *testing.T, kind string, within time.Duration) report {
	t.Helper()
	select {
	case r := <-s.ch:
		if kind != "" && r.kind != kind {
			t.Fatalf("got %s (%+v), want %s", r.kind, r, kind)
		}
		return r
	case <-time.After(within):
		t.Fatalf("no %s report within %v", kind, within)
	}
	panic("unreachable")
}

func (s *sink) none(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case r := <-s.ch:
		t.Fatalf("unexpected report %s %+v", r.kind, r)
	case <-time.After(within):
	}
}

// testServer is one simulated server (package sim, the project's one fake
// PVA server) seen the way these tests use it.
type testServer struct{ site *sim.Site }

func (s testServer) GUID() pva.GUID               { return s.site.Server(0).GUID }
func (s testServer) Addr() netip.AddrPort         { return s.site.Server(0).TCP }
func (s testServer) SetNames(names []string)      { _ = s.site.SetNames(0, names) }
func (s testServer) Accepted() int                { return s.site.Server(0).Accepted }
func (s testServer) Listings() int                { return s.site.Server(0).Listings }
func (s testServer) CloseConns()                  { _ = s.site.DropConnections(0) }
func (s testServer) Mute()                        { _ = s.site.Kill(0) }
func (s testServer) Unmute()                      { _ = s.site.Revive(0) }
func (s testServer) SendBeacon(to netip.AddrPort) { _ = s.site.Beacon(0, to) }
func (s testServer) Close()                       { _ = s.site.Close() }

// newServer starts a one-server site serving names (none if empty), on
// loopback, values that do not move, no beacons unless asked.
func newServer(opt sim.Options, names ...string) (testServer, error) {
	opt.Servers = 1
	opt.Names = [][]string{append([]string{}, names...)}
	opt.UpdateInterval = -1
	site, err := sim.Start(context.Background(), opt)
	return testServer{site}, err
}

func startServer(t *testing.T, opt sim.Options, names ...string) testServer {
	t.Helper()
	srv, err := newServer(opt, names...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func newProber(t *testing.T, opt Options) *Prober {
	t.Helper()
	if opt.Rand == nil {
		opt.Rand = rand.New(rand.NewPCG(1, 2))
	}
	p := New(withProduction(opt))
	t.Cleanup(p.Close)
	return p
}

// withProduction gives opt the production values (config.Defaults) of the
// settings it leaves zero, as the daemon passes them (Apply): a zero
// option means none, and these tests run the prober as it runs in pvans.
// A zero Backoff takes the production bounds only, so a test's retry
// delays stay exact (no jitter).
func withProduction(opt Options) Options {
	c := config.Defaults()
	set := func(f *time.Duration, v time.Duration) {
		if *f == 0 {
			*f = v
		}
	}
	setN := func(f *int, v int) {
		if *f == 0 {
			*f = v
		}
	}
	setN(&opt.Concurrency, DefaultConcurrency)
	setN(&opt.PerHostConcurrency, DefaultPerHostConcurrency)
	setN(&opt.ThroughRetries, DefaultThroughRetries)
	setN(&opt.MaxThrough, DefaultMaxThrough)
	set(&opt.EchoInterval, c.PVA.EchoInterval())
	set(&opt.ProbeTimeout, DefaultTimeout)
	set(&opt.FirstTimeout, DefaultFirstTimeout)
	set(&opt.Reprobe, DefaultReprobeInterval)
	if opt.Backoff.Min == 0 {
		opt.Backoff.Min, opt.Backoff.Max = DefaultBackoffMin, DefaultBackoffMax
	}
	return opt
}

// --- backoff --------------------------------------------------------------

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 10 * time.Second, Factor: 2, Jitter: 0.2}
	want := []time.Duration{1, 2, 4, 8, 10, 10}
	for i, w := range want {
		if d := b.Delay(i+1, 0.5); d != w*time.Second {
			t.Errorf("Delay(%d, mid) = %v, want %v", i+1, d, w*time.Second)
		}
	}
	if d := b.Delay(3, 0); d != 3200*time.Millisecond {
		t.Errorf("low jitter: %v", d)
	}
	if d := b.Delay(3, 0.999999); d < 4790*time.Millisecond || d >= 4800*time.Millisecond {
		t.Errorf("high jitter: %v", d)
	}
	if d := b.Delay(1000, 0.5); d != 10*time.Second {
		t.Errorf("many failures: %v", d)
	}
	if d := (Backoff{}).Delay(3, 0.5); d != 0 {
		t.Errorf("a zero Min is no backoff, but Delay = %v", d)
	}
	if d := (Backoff{Min: time.Second, Factor: 2}).Delay(1000, 0.5); d < time.Duration(1<<61) {
		t.Errorf("without a cap: Delay(1000) = %v, want the ceiling, short of overflow", d)
	}
	if d := (Backoff{Min: time.Second, Max: time.Millisecond}).Delay(5, 0.5); d != time.Second {
		t.Errorf("a Max below Min is Min, but Delay = %v", d)
	}
}

// The retry schedule, run by the prober on a fake clock: each retry happens
// exactly Backoff.Delay(n, u_n) after the previous failure, with u_n drawn
// from the seeded source, and not a nanosecond earlier.
func TestBackoffScheduleFakeClock(t *testing.T) {
	c := clock.NewFake(time.Time{})
	dials := make(chan time.Time, 10)
	ep := netip.MustParseAddrPort("127.0.0.1:1")
	k := newSink()
	p := newProber(t, Options{Clock: c, Sink: k, Rand: rand.New(rand.NewPCG(7, 7)),
		Dial: func(ctx context.Context, _ netip.AddrPort, _ pvaconn.Options, _ pvaconn.Handler) (*pvaconn.Conn, error) {
			dials <- c.Now()
			return nil, errors.New("connection refused")
		}})
	type sched struct {
		d        time.Duration
		failures int
	}
	scheds := make(chan sched, 10)
	p.onSchedule = func(_ netip.AddrPort, d time.Duration, f int) { scheds <- sched{d, f} }
	expect := rand.New(rand.NewPCG(7, 7))

	p.Probe(pva.GUID{1}, ep, ReasonNew)
	last := <-dials
	if r := k.next(t, "unlistable", time.Second); r.guid != (pva.GUID{1}) {
		t.Fatalf("report %+v", r)
	}
	for n := 1; n <= 6; n++ {
		s := <-scheds
		want := p.opt.Backoff.Delay(n, expect.Float64())
		if s.failures != n || s.d != want {
			t.Fatalf("retry %d: scheduled %v after %d failures, want %v", n, s.d, s.failures, want)
		}
		c.Advance(s.d - time.Nanosecond)
		select {
		case at := <-dials:
			t.Fatalf("retry %d dialled early at +%v", n, at.Sub(last))
		case <-time.After(10 * time.Millisecond):
		}
		c.Advance(time.Nanosecond)
		at := <-dials
		if at.Sub(last) != want {
			t.Fatalf("retry %d after %v, want %v", n, at.Sub(last), want)
		}
		last = at
	}
	// One Unlistable for the episode, not one per retry.
	k.none(t, 20*time.Millisecond)
	if p.stats.ConnectFailures.Load() != 7 || p.stats.Unlistable.Load() != 1 {
		t.Fatalf("stats %+v", metrics.Sprint(&p.stats))
	}
}

// --- listing and watching against the in-repo test server -----------------

func TestListAndRelist(t *testing.T) {
	srv := startServer(t, sim.Options{Version: "PVXS 9.9"}, "b:two", "a:one", "b:two")
	k := newSink()
	c := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: c, Sink: k})
	p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
	r := k.next(t, "listed", 5*time.Second)
	if r.guid != srv.GUID() || r.ep != srv.Addr() || !slices.Equal(r.names, []string{"a:one", "b:two"}) {
		t.Fatalf("listed %+v", r)
	}
	if r.info.ImplLang != "cpp" || r.info.Version != "PVXS 9.9" || r.info.Err != "" {
		t.Fatalf("info %+v", r.info)
	}
	// Change count moved: re-listed on the same watch connection.
	srv.SetNames([]string{"c:three"})
	c.Advance(2 * time.Second) // hints: one probe per backoff step
	p.Probe(srv.GUID(), srv.Addr(), ReasonSourcesChanged)
	if r := k.next(t, "listed", 5*time.Second); !slices.Equal(r.names, []string{"c:three"}) {
		t.Fatalf("relisted %+v", r)
	}
	// Periodic re-listing at Reprobe ±10 %.
	srv.SetNames([]string{"d:four"})
	next := p.Servers()[0].NextAttempt.Sub(c.Now())
	if re := DefaultReprobeInterval; next < re*9/10 || next >= re*11/10 {
		t.Fatalf("re-listing in %v, want %v ±10%%", next, re)
	}
	c.Advance(next - time.Nanosecond)
	k.none(t, 20*time.Millisecond)
	c.Advance(time.Nanosecond)
	if r := k.next(t, "listed", 5*time.Second); !slices.Equal(r.names, []string{"d:four"}) {
		t.Fatalf("periodic %+v", r)
	}
	if srv.Accepted() != 1 || srv.Listings() != 3 {
		t.Fatalf("accepted %d listings %d, want one connection, three listings", srv.Accepted(), srv.Listings())
	}
	st := p.Servers()
	if len(st) != 1 || st[0].State != StateListed || !st[0].Connected || st[0].Names != 1 {
		t.Fatalf("status %+v", st)
	}
}

func TestRefusedAndErrorAreUnlistableAndRetried(t *testing.T) {
	for _, opt := range []sim.Options{{RefuseChannels: true}, {RPCError: "Not implemented"}} {
		srv := startServer(t, opt)
		k := newSink()
		c := clock.NewFake(time.Time{})
		p := newProber(t, Options{Clock: c, Sink: k})
		p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
		r := k.next(t, "unlistable", 5*time.Second)
		var le *ListError
		if !errors.As(r.err, &le) || le.Status.OK() {
			t.Fatalf("%+v: err %v, want a ListError with the server's status", opt, r.err)
		}
		// Retried on the same (live) connection after the backoff of an
		// unlistable server.
		c.Advance(UnlistableRetryMin)
		k.next(t, "unlistable", 5*time.Second)
		if srv.Accepted() != 1 {
			t.Fatalf("accepted %d", srv.Accepted())
		}
		// The watch still works for an unlistable server.
		srv.CloseConns()
		if r := k.next(t, "lost", 2*time.Second); r.guid != srv.GUID() {
			t.Fatalf("lost %+v", r)
		}
	}
}

func TestCleanCloseLostAndReconnect(t *testing.T) {
	srv := startServer(t, sim.Options{}, "x")
	k := newSink()
	c := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: c, Sink: k})
	p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
	k.next(t, "listed", 5*time.Second)
	start := time.Now()
	srv.CloseConns()
	r := k.next(t, "lost", 2*time.Second)
	t.Logf("clean close reported lost after %v (%s)", r.at.Sub(start), r.reason)
	if r.guid != srv.GUID() {
		t.Fatalf("lost %+v", r)
	}
	if !p.Gone(srv.Addr()) {
		t.Fatal("Gone false after the loss was reported")
	}
	// Reconnect after the backoff (≤ 1.2 s on the fake clock), then re-list.
	c.Advance(1200 * time.Millisecond)
	k.next(t, "listed", 5*time.Second)
	if p.Gone(srv.Addr()) {
		t.Fatal("Gone true after the server was listed again")
	}
	if srv.Accepted() != 2 {
		t.Fatalf("accepted %d", srv.Accepted())
	}
}

func TestSilentDeathLostWithinTwoEchoIntervals(t *testing.T) {
	const echo = 300 * time.Millisecond
	srv := startServer(t, sim.Options{}, "x")
	k := newSink()
	p := newProber(t, Options{Sink: k, EchoInterval: echo, Clock: clock.NewFake(time.Time{})})
	p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
	k.next(t, "listed", 5*time.Second)

	// Hysteresis: silent for half an interval is not a loss.
	srv.Mute()
	time.Sleep(echo / 2)
	srv.Unmute()
	k.none(t, 3*echo)

	start := time.Now()
	srv.Mute()
	r := k.next(t, "lost", 2*echo+500*time.Millisecond)
	el := r.at.Sub(start)
	t.Logf("silent server reported lost after %v (echo %v): %s", el, echo, r.reason)
	if el > 2*echo+100*time.Millisecond || el < echo-50*time.Millisecond {
		t.Fatalf("lost after %v, want within (1, 2] echo intervals", el)
	}
}

// swapDial dials whichever test server *cur points at, whatever endpoint
// the prober asks for: one endpoint whose listener changes, as when a
// server restarts on its port.
func swapDial(cur *atomic.Pointer[testServer]) DialFunc {
	return func(ctx context.Context, _ netip.AddrPort, o pvaconn.Options, h pvaconn.Handler) (*pvaconn.Conn, error) {
		return pvaconn.Dial(ctx, cur.Load().Addr(), o, h)
	}
}

// A hint with a new GUID at a watched endpoint (a forged beacon) is checked
// over a fresh TCP connection; the endpoint answers with the watched GUID,
// so nothing is reported and the old watch stays (the trust rule).
func TestRestartClaimRefutedWhileWatched(t *testing.T) {
	srv := startServer(t, sim.Options{}, "x")
	k := newSink()
	c := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: c, Sink: k})
	p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
	k.next(t, "listed", 5*time.Second)
	c.Advance(2 * time.Second) // past the first hint step
	p.Probe(pva.GUID{0xBA, 0xD}, srv.Addr(), ReasonChanged)
	testutil.WaitFor(t, 5*time.Second, "the claim to be checked", func() bool { return p.stats.VerifyRefuted.Load() == 1 })
	k.none(t, 200*time.Millisecond)
	ss := p.Servers()
	if len(ss) != 1 || ss[0].GUID != srv.GUID() || !ss[0].Connected || ss[0].State != StateListed || ss[0].NextAttempt.IsZero() {
		t.Fatalf("prober state after a refuted claim: %+v", ss)
	}
	if srv.Accepted() != 2 {
		t.Fatalf("accepted %d connections, want the watch and one check", srv.Accepted())
	}
	srv.CloseConns() // the old watch is still the one that reports
	if r := k.next(t, "lost", 5*time.Second); r.guid != srv.GUID() {
		t.Fatalf("lost %+v", r)
	}
}

// A real restart: the endpoint answers with the new GUID over TCP. The new
// instance is reported listed (the registry replaces the old one from
// that), with no loss reported in between, and becomes the watch.
func TestRestartClaimConfirmed(t *testing.T) {
	a := startServer(t, sim.Options{}, "x", "y")
	b := startServer(t, sim.Options{}, "x")
	var cur atomic.Pointer[testServer]
	cur.Store(&a)
	k := newSink()
	c := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: c, Sink: k, Dial: swapDial(&cur)})
	ep := netip.MustParseAddrPort("192.0.2.1:5075")
	p.Probe(a.GUID(), ep, ReasonNew)
	k.next(t, "listed", 5*time.Second)
	cur.Store(&b)
	c.Advance(2 * time.Second)
	p.Probe(b.GUID(), ep, ReasonChanged)
	if r := k.next(t, "listed", 5*time.Second); r.guid != b.GUID() || r.ep != ep || !slices.Equal(r.names, []string{"x"}) {
		t.Fatalf("listed %+v", r)
	}
	if p.stats.VerifyConfirmed.Load() != 1 || p.stats.Lost.Load() != 0 {
		t.Fatalf("stats %+v", metrics.Sprint(&p.stats))
	}
	b.CloseConns()
	if r := k.next(t, "lost", 5*time.Second); r.guid != b.GUID() {
		t.Fatalf("lost %+v", r)
	}
}

// A server that answers no search over TCP, neither the discovery ping nor
// a search for a name it listed, cannot confirm a claim while the old
// watch is alive; once the old watch is gone, the next hint is taken.
func TestRestartClaimWithoutPingNeedsOldWatchGone(t *testing.T) {
	a := startServer(t, sim.Options{NoTCPSearch: true}, "x")
	b := startServer(t, sim.Options{NoTCPSearch: true}, "z")
	var cur atomic.Pointer[testServer]
	cur.Store(&a)
	k := newSink()
	c := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: c, Sink: k, Dial: swapDial(&cur), PingWait: 50 * time.Millisecond})
	ep := netip.MustParseAddrPort("192.0.2.1:5075")
	ga := a.GUID()
	p.Probe(ga, ep, ReasonNew)
	k.next(t, "listed", 5*time.Second)
	cur.Store(&b)
	c.Advance(2 * time.Second)
	p.Probe(b.GUID(), ep, ReasonChanged)
	testutil.WaitFor(t, 5*time.Second, "the claim to be checked", func() bool { return p.stats.VerifyRefuted.Load() == 1 })
	a.CloseConns()
	if r := k.next(t, "lost", 5*time.Second); r.guid != ga {
		t.Fatalf("lost %+v", r)
	}
	c.Advance(10 * time.Second)
	p.Probe(b.GUID(), ep, ReasonChanged)
	if r := k.next(t, "listed", 5*time.Second); r.guid != b.GUID() || !slices.Equal(r.names, []string{"z"}) {
		t.Fatalf("listed %+v", r)
	}
}

// A flapping GUID at one endpoint (forged beacons alternating GUIDs as
// fast as they can be sent) costs one probe per backoff step, not one per
// datagram.
func TestFlappingGUIDOneProbePerStep(t *testing.T) {
	srv := startServer(t, sim.Options{}, "x")
	k := newSink()
	c := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: c, Sink: k, Backoff: Backoff{Min: time.Second, Max: time.Minute, Factor: 2, Jitter: 0.2}})
	p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
	k.next(t, "listed", 5*time.Second)
	idle := func() bool { ss := p.Servers(); return len(ss) == 1 && ss[0].State != StateProbing }
	flap := func() {
		for i := range 200 {
			g := srv.GUID()
			if i%2 == 0 {
				g = pva.GUID{0xF1, byte(i)}
			}
			p.Probe(g, srv.Addr(), ReasonChanged)
		}
	}
	flap()
	if p.stats.Probes.Load() != 1 || p.stats.HintsDeferred.Load() != 200 {
		t.Fatalf("within the first step: %+v", metrics.Sprint(&p.stats))
	}
	for step, want := range []uint64{2, 3, 4} {
		c.Advance(time.Duration(1.25 * float64(time.Second<<step)))
		testutil.WaitFor(t, 5*time.Second, "the step's probe", func() bool { return p.stats.Probes.Load() == want && idle() })
		flap()
		time.Sleep(20 * time.Millisecond)
		if p.stats.Probes.Load() != want {
			t.Fatalf("step %d: %d probes, want %d", step, p.stats.Probes.Load(), want)
		}
	}
}

// A static server whose connection closes after its listing was read but
// before the result is settled must not keep those names: nothing watches
// them and no beacon would ever expire them.
func TestStaticServerClosedBeforeSettle(t *testing.T) {
	srv := startServer(t, sim.Options{NoPing: true}, "gone")
	k := newSink()
	p := newProber(t, Options{Clock: clock.NewFake(time.Time{}), Sink: k, PingWait: 2 * time.Second})
	p.SetStatic([]netip.AddrPort{srv.Addr()})
	testutil.WaitFor(t, 5*time.Second, "the listing to be served", func() bool { return srv.Listings() == 1 })
	srv.CloseConns() // while the prober waits for a ping answer that never comes
	r := k.next(t, "unlistable", 5*time.Second)
	if r.guid != StaticGUID(srv.Addr()) {
		t.Fatalf("unlistable %+v", r)
	}
	k.none(t, 300*time.Millisecond)
	if ss := p.Servers(); len(ss) != 1 || ss[0].State != StateFailed || ss[0].NextAttempt.IsZero() {
		t.Fatalf("state %+v", ss)
	}
}

func TestStaticServers(t *testing.T) {
	pinged := startServer(t, sim.Options{}, "p")
	silent := startServer(t, sim.Options{NoTCPSearch: true}, "s")
	k := newSink()
	p := newProber(t, Options{Clock: clock.NewFake(time.Time{}), Sink: k, PingWait: 100 * time.Millisecond})
	p.SetStatic([]netip.AddrPort{pinged.Addr(), silent.Addr()})
	got := map[netip.AddrPort]report{}
	for range 2 {
		r := k.next(t, "listed", 5*time.Second)
		got[r.ep] = r
	}
	if got[pinged.Addr()].guid != pinged.GUID() {
		t.Fatalf("static server GUID %v, want its own %v (TCP discovery ping)", got[pinged.Addr()].guid, pinged.GUID())
	}
	if got[silent.Addr()].guid != StaticGUID(silent.Addr()) {
		t.Fatalf("GUID %v, want synthetic", got[silent.Addr()].guid)
	}
	// The silent one (nothing else announced it) goes, and is reported
	// lost, so its names go too: forgetting it closed the watch that would
	// have reported it (a DNS change dropping its address left its names
	// registered for good).
	p.SetStatic([]netip.AddrPort{pinged.Addr()})
	if n := len(p.Servers()); n != 1 {
		t.Fatalf("%d servers after removing one static", n)
	}
	if r := k.next(t, "lost", 2*time.Second); r.ep != silent.Addr() || r.guid != StaticGUID(silent.Addr()) {
		t.Fatalf("lost %+v, want the server taken off the list", r)
	}
	// A static server is never forgotten as unproven (an eviction of its
	// tracker entry).
	if p.ForgetUnproven(pinged.Addr(), pinged.GUID()) || !p.Proven(pinged.Addr()) {
		t.Fatal("a static, listed server was forgotten as unproven")
	}
	// Off the list, it stays while its watch answers (it proved its own
	// GUID, as a server a beacon announced does): neither a forged GUID's
	// eviction nor its own forgets it.
	p.SetStatic(nil)
	if p.ForgetUnproven(pinged.Addr(), pva.GUID{0xEE}) || p.ForgetUnproven(pinged.Addr(), pinged.GUID()) {
		t.Fatal("a watched server was forgotten as unproven")
	}
}

func TestConcurrencyBound(t *testing.T) {
	var cur, peak atomic.Int32
	release := make(chan struct{})
	p := newProber(t, Options{Clock: clock.NewFake(time.Time{}), Sink: newSink(), Concurrency: 3,
		Dial: func(ctx context.Context, _ netip.AddrPort, _ pvaconn.Options, _ pvaconn.Handler) (*pvaconn.Conn, error) {
			n := cur.Add(1)
			for {
				if m := peak.Load(); n <= m || peak.CompareAndSwap(m, n) {
					break
				}
			}
			<-release
			cur.Add(-1)
			return nil, errors.New("no")
		}})
	for i := range 10 {
		p.Probe(pva.GUID{byte(i + 1)}, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(1000+i)), ReasonNew)
	}
	time.Sleep(50 * time.Millisecond)
	if peak.Load() != 3 {
		t.Fatalf("peak %d concurrent probes, want 3", peak.Load())
	}
	close(release)
}

// --- a replayed pvAccessCPP server (capture blocks #73-#81) ---------------

func hexb(s string) []byte {
	var b []byte
	for i := 0; i+1 < len(s); {
		if s[i] == ' ' {
			i++
			continue
		}
		var v byte
		fmt.Sscanf(s[i:i+2], "%02x", &v)
		b = append(b, v)
		i += 2
	}
	return b
}

var (
	cap73 = hexb("ca 02 41 02 00 00 00 00 ca 02 40 01 14 00 00 00 00 44 00 00 ff 7f 02 09 61 6e 6f 6e 79 6d 6f 75 73 02 63 61")
	cap75 = hexb("ca 02 40 09 01 00 00 00 ff")
	cap77 = hexb("ca 02 40 07 09 00 00 00 41 30 20 10 01 34 00 12 ff")
	cap79 = hexb("ca 02 40 14 06 00 00 00 51 60 70 80 08 ff")
	cap81 = hexb("ca 02 40 14 39 00 00 00 51 60 70 80 10 ff fd 01 00 80 1a 65 70 69 63 73 3a 6e 74 2f 4e 54 53 63" +
		"61 6c 61 72 41 72 72 61 79 3a 31 2e 30 01 05 76 61 6c 75 65 68 01 0a 63 61 70 3a 63 3a 6d 62 6f 78")
	// GUID of server C, from its beacon (#72).
	capGUID = pva.GUID(hexb("de 83 11 6b 00 00 00 00 69 75 09 22"))
)

// withID returns a copy of a captured little-endian reply with the u32 at
// payload offset 0 (CID or IOID) replaced by the client's.
func withID(b []byte, id uint32) []byte {
	b = slices.Clone(b)
	b[8], b[9], b[10], b[11] = byte(id), byte(id>>8), byte(id>>16), byte(id>>24)
	return b
}

// replayServer answers like the pvAccessCPP server C of the capture by
// writing its captured bytes; only the CID/IOID are patched in.
func replayServer(t *testing.T) netip.AddrPort {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		go func() { <-t.Context().Done(); nc.Close() }()
		nc.Write(cap73)
		var buf []byte
		tmp := make([]byte, 4096)
		var tc pva.TypeCache
		for {
			n, err := nc.Read(tmp)
			if err != nil {
				return
			}
			buf = append(buf, tmp[:n]...)
			for {
				h, payload, rest, err := pva.SplitMessage(buf)
				if err != nil {
					break
				}
				buf = rest
				if h.Control() {
					continue
				}
				switch h.Command {
				case pva.CmdConnectionValidation:
					nc.Write(cap75)
				case pva.CmdEcho:
					nc.Write(pva.AppendEcho(nil, pva.FlagServer, payload))
				case pva.CmdCreateChannel:
					var m pva.CreateChannel
					if m.Decode(payload, h.BigEndian()) == nil {
						nc.Write(withID(cap77, m.Channels[0].CID))
					}
				case pva.CmdRPC:
					var m pva.RPCRequest
					if m.Decode(payload, h.BigEndian(), &tc) != nil {
						return
					}
					switch _, op, _ := pva.NTURIOp(m.Value); {
					case m.IsInit():
						nc.Write(withID(cap79, m.IOID))
					case op == pva.OpChannels:
						nc.Write(withID(cap81, m.IOID))
					default:
						nc.Write(pva.AppendRPCReply(nil, pva.FlagServer, &pva.RPCReply{IOID: m.IOID,
							Status: pva.Status{Type: pva.StatusError, Message: "not captured"}}))
					}
				}
			}
		}
	}()
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

func TestReplayedPvAccessCPPServer(t *testing.T) {
	addr := replayServer(t)
	k := newSink()
	p := newProber(t, Options{Clock: clock.NewFake(time.Time{}), Sink: k})
	p.Probe(capGUID, addr, ReasonNew)
	r := k.next(t, "listed", 5*time.Second)
	if r.guid != capGUID || !slices.Equal(r.names, []string{"cap:c:mbox"}) {
		t.Fatalf("listed %+v", r)
	}
	if r.info.Err == "" {
		t.Fatalf("info from a server that refused op=info: %+v", r.info)
	}
}

// --- beacon → tracker → probe, end to end on loopback ---------------------

func TestBeaconToProbe(t *testing.T) {
	srv := startServer(t, sim.Options{}, "bx")
	k := newSink()
	pc := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: pc, Sink: k})
	tr := beacon.New(beacon.Options{Clock: clock.NewFake(time.Time{}), OnEvent: func(ev beacon.Event) {
		switch ev.Kind {
		case beacon.EventNew:
			p.Probe(ev.GUID, ev.Endpoint, ReasonNew)
		case beacon.EventSourcesChanged:
			p.Probe(ev.GUID, ev.Endpoint, ReasonSourcesChanged)
		}
	}})
	u, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	to := u.LocalAddr().(*net.UDPAddr).AddrPort()
	recv := func() {
		t.Helper()
		buf := make([]byte, 1500)
		u.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, from, err := u.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		h, payload, _, err := pva.SplitMessage(buf[:n])
		if err != nil || h.Command != pva.CmdBeacon {
			t.Fatalf("not a beacon: %v %v", h, err)
		}
		var b pva.Beacon
		if err := b.Decode(payload, h.BigEndian()); err != nil {
			t.Fatal(err)
		}
		ip := b.Addr.Addr()
		if b.Addr.IsAny() {
			ip = from.Addr()
		}
		tr.Observe(beacon.Observation{GUID: b.GUID, Endpoint: netip.AddrPortFrom(ip, b.Port), Protocol: b.Protocol,
			Version: h.Version, ChangeCount: b.ChangeCount, From: from, Via: beacon.ViaBeacon})
	}
	srv.SendBeacon(to)
	recv()
	if r := k.next(t, "listed", 5*time.Second); r.guid != srv.GUID() || !slices.Equal(r.names, []string{"bx"}) {
		t.Fatalf("listed %+v", r)
	}
	srv.SetNames([]string{"by"})
	pc.Advance(2 * time.Second) // hints: one probe per backoff step
	srv.SendBeacon(to)
	recv()
	if r := k.next(t, "listed", 5*time.Second); !slices.Equal(r.names, []string{"by"}) {
		t.Fatalf("after change count: %+v", r)
	}
}

// --- static name files ----------------------------------------------------

func TestNameFiles(t *testing.T) {
	dir := t.TempDir()
	k := newSink()
	c := clock.NewFake(time.Time{})
	f := &NameFiles{Dir: dir, Interval: 10 * time.Second, Sink: k, Clock: c}
	a := filepath.Join(dir, "ioc-a.txt")
	os.WriteFile(a, []byte("# endpoint 127.0.0.5:5064\nA:1\n\n# comment\nA:2\n"), 0o644)
	b := filepath.Join(dir, "127.0.0.6_5075.names")
	os.WriteFile(b, []byte("B:1\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "garbage"), []byte("X\n"), 0o644) // no endpoint: skipped
	f.Start()
	defer f.Close()
	got := map[netip.AddrPort][]string{}
	for range 2 {
		r := k.next(t, "listed", time.Second)
		if r.guid != StaticGUID(r.ep) || r.info.File == "" {
			t.Fatalf("report %+v", r)
		}
		got[r.ep] = r.names
	}
	if !slices.Equal(got[netip.MustParseAddrPort("127.0.0.5:5064")], []string{"A:1", "A:2"}) ||
		!slices.Equal(got[netip.MustParseAddrPort("127.0.0.6:5075")], []string{"B:1"}) {
		t.Fatalf("got %v", got)
	}
	k.none(t, 10*time.Millisecond)
	c.Advance(10 * time.Second) // unchanged: nothing
	k.none(t, 10*time.Millisecond)
	os.WriteFile(a, []byte("# endpoint 127.0.0.5:5064\nA:3\n"), 0o644)
	os.Chtimes(a, time.Now(), time.Now().Add(time.Hour))
	os.Remove(b)
	c.Advance(10 * time.Second)
	r1, r2 := <-k.ch, <-k.ch
	if r1.kind != "listed" || !slices.Equal(r1.names, []string{"A:3"}) || r2.kind != "lost" ||
		r2.ep != netip.MustParseAddrPort("127.0.0.6:5075") {
		t.Fatalf("after change: %+v %+v", r1, r2)
	}
}

// --- benchmark ------------------------------------------------------------

// BenchmarkList100kNames: connect, handshake, create the channel and list a
// server with 100,000 names (target < 2 s per listing).
func BenchmarkList100kNames(b *testing.B) {
	names := make([]string, 100000)
	for i := range names {
		names[i] = fmt.Sprintf("SITE:SYS%03d:DEV%04d:SIGNAL", i%1000, i)
	}
	srv, err := newServer(sim.Options{}, names...)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	b.ReportAllocs()
	for b.Loop() {
		k := newSink()
		p := New(withProduction(Options{Clock: clock.NewFake(time.Time{}), Sink: k}))
		p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
		r := <-k.ch
		if r.kind != "listed" || len(r.names) != len(names) {
			b.Fatalf("%s %d names %v", r.kind, len(r.names), r.err)
		}
		p.Close()
	}
}

func TestObserveReportsResultAndDuration(t *testing.T) {
	srv := startServer(t, sim.Options{}, "obs:a")
	type obs struct {
		result string
		took   time.Duration
	}
	got := make(chan obs, 10)
	k := newSink()
	p := newProber(t, Options{Sink: k, Observe: func(r string, d time.Duration) { got <- obs{r, d} }})
	p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
	k.next(t, "listed", 5*time.Second)
	select {
	case o := <-got:
		if o.result != "ok" || o.took <= 0 || o.took > 5*time.Second {
			t.Fatalf("observed %+v", o)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no observation")
	}
}

func TestDefaultIdleTimeout(t *testing.T) {
	for _, c := range []struct{ echo, want time.Duration }{
		{15 * time.Second, 25 * time.Second}, // PVXS default echo: silent death found within 25 s
		{2 * time.Second, 4 * time.Second},
		{300 * time.Millisecond, 600 * time.Millisecond},
		{60 * time.Second, 70 * time.Second},
	} {
		if got := DefaultIdleTimeout(c.echo); got != c.want {
			t.Errorf("DefaultIdleTimeout(%v) = %v, want %v", c.echo, got, c.want)
		}
	}
}

// Observe is independent of the Sink: a metrics-only prober still reports.
func TestObserveWithoutSink(t *testing.T) {
	srv := startServer(t, sim.Options{}, "obs:b")
	got := make(chan string, 4)
	p := newProber(t, Options{Observe: func(r string, _ time.Duration) { got <- r }})
	p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
	select {
	case r := <-got:
		if r != "ok" {
			t.Fatalf("observed %q", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no observation without a Sink")
	}
}

// Forgetting a server ends its probe whether it waits for a slot or is
// dialling: an endpoint evicted at the tracker's limit (or removed by a
// reload) leaves no goroutine and no connection attempt behind. Forged
// beacons churning evictions piled up one waiting goroutine per beacon.
func TestForgetEndsWaitingAndDialingProbes(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	var dialing atomic.Int32
	p := newProber(t, Options{Clock: clock.NewFake(time.Time{}), Sink: newSink(), Concurrency: 2, PerHostConcurrency: 2,
		Dial: func(ctx context.Context, _ netip.AddrPort, _ pvaconn.Options, _ pvaconn.Handler) (*pvaconn.Conn, error) {
			dialing.Add(1)
			defer dialing.Add(-1)
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-block:
				return nil, errors.New("no")
			}
		}})
	const n = 200
	var eps []netip.AddrPort
	for i := range n {
		ep := netip.AddrPortFrom(netip.MustParseAddr("10.9.9.9"), uint16(1000+i))
		eps = append(eps, ep)
		p.Probe(pva.GUID{byte(i), byte(i >> 8), 1}, ep, ReasonNew)
	}
	testutil.WaitFor(t, 5*time.Second, "the pool full and the rest waiting", func() bool {
		return dialing.Load() == 2 && p.sched.stats().waiting == n-2
	})
	for _, ep := range eps {
		p.Forget(ep)
	}
	testutil.WaitFor(t, 5*time.Second, "no probe waiting or dialling", func() bool {
		return dialing.Load() == 0 && p.sched.stats().waiting == 0
	})
}
