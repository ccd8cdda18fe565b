package beacon

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
)

type recorder struct {
	mu  sync.Mutex
	evs []Event
}

func (r *recorder) on(ev Event) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
}

func (r *recorder) take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.evs
	r.evs = nil
	return e
}

func guid(b byte) pva.GUID { return pva.GUID{0: b, 11: b} }

var (
	ep1  = netip.MustParseAddrPort("127.0.0.1:5075")
	ep2  = netip.MustParseAddrPort("127.0.0.2:5075")
	from = netip.MustParseAddrPort("127.0.0.1:40000")
)

func beaconObs(g pva.GUID, ep netip.AddrPort, cc uint16) Observation {
	return Observation{GUID: g, Endpoint: ep, Protocol: "tcp", Version: 2, ChangeCount: cc, From: from, Via: ViaBeacon}
}

func newTracker(t *testing.T, c *clock.Fake, expiry, check time.Duration, limit int) (*Tracker, *recorder) {
	t.Helper()
	r := &recorder{}
	tr := New(Options{Clock: c, Expiry: expiry, CheckInterval: check, Limit: limit, OnEvent: r.on})
	tr.Start()
	t.Cleanup(tr.Close)
	return tr, r
}

func kinds(evs []Event) []EventKind {
	out := make([]EventKind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

func TestExpiryExactlyAtConfiguredTime(t *testing.T) {
	// Check interval 1 s divides the expiry: the entry is lost at exactly
	// LastSeen+Expiry, not one tick before.
	c := clock.NewFake(time.Time{})
	tr, r := newTracker(t, c, 360*time.Second, time.Second, 0)
	t0 := c.Now()
	tr.Observe(beaconObs(guid(1), ep1, 0))
	if k := kinds(r.take()); len(k) != 1 || k[0] != EventNew {
		t.Fatalf("events %v, want [new]", k)
	}
	c.Advance(100 * time.Second)
	tr.Observe(beaconObs(guid(1), ep1, 0)) // refresh at t0+100
	c.Set(t0.Add(459 * time.Second))
	if evs := r.take(); len(evs) != 0 {
		t.Fatalf("lost one tick early: %v", kinds(evs))
	}
	if len(tr.Servers()) != 1 {
		t.Fatal("entry gone before expiry")
	}
	c.Set(t0.Add(460 * time.Second))
	evs := r.take()
	if len(evs) != 1 || evs[0].Kind != EventLost || evs[0].GUID != guid(1) || evs[0].Endpoint != ep1 {
		t.Fatalf("events %+v, want one lost for guid 1", evs)
	}
	if !evs[0].At.Equal(t0.Add(460 * time.Second)) {
		t.Fatalf("lost at %v, want t0+460s", evs[0].At.Sub(t0))
	}
	if tr.stats.lost.Load() != 1 || tr.Tracked() != 0 {
		t.Fatalf("stats %+v", metrics.Sprint(&tr.stats))
	}
}

func TestExpiryGranularityIsCheckInterval(t *testing.T) {
	// With only the 180 s check, an entry seen at t0+10 expires at
	// t0+370 but is only noticed at the check at t0+540.
	c := clock.NewFake(time.Time{})
	tr, r := newTracker(t, c, 360*time.Second, 180*time.Second, 0)
	t0 := c.Now()
	c.Advance(10 * time.Second)
	tr.Observe(beaconObs(guid(1), ep1, 0))
	r.take()
	c.Set(t0.Add(539 * time.Second))
	if evs := r.take(); len(evs) != 0 {
		t.Fatalf("lost before the check: %v at %v", kinds(evs), evs[0].At.Sub(t0))
	}
	c.Set(t0.Add(540 * time.Second))
	evs := r.take()
	if len(evs) != 1 || evs[0].Kind != EventLost || !evs[0].At.Equal(t0.Add(540*time.Second)) {
		t.Fatalf("events %+v, want lost at t0+540s", evs)
	}
}

func TestFutureEntryDropped(t *testing.T) {
	c := clock.NewFake(time.Time{})
	tr, r := newTracker(t, c, 360*time.Second, 10*time.Second, 0)
	tr.Observe(beaconObs(guid(1), ep1, 0))
	r.take()
	// Simulate a wall clock stepped back: make LastSeen lie 16 s ahead.
	tr.mu.Lock()
	tr.table[key{ep1, "tcp"}].LastSeen = c.Now().Add(16*time.Second + 10*time.Second)
	tr.mu.Unlock()
	c.Advance(10 * time.Second)
	if k := kinds(r.take()); len(k) != 1 || k[0] != EventLost {
		t.Fatalf("events %v, want [lost]", k)
	}
}

func TestRestartDetectedOnNewGUIDOrVersion(t *testing.T) {
	c := clock.NewFake(time.Time{})
	tr, r := newTracker(t, c, 0, 0, 0)
	tr.Observe(beaconObs(guid(1), ep1, 3))
	tr.Observe(beaconObs(guid(1), ep1, 3))
	// A different sender address alone is not a change.
	o := beaconObs(guid(1), ep1, 3)
	o.From = netip.MustParseAddrPort("127.0.0.9:1")
	tr.Observe(o)
	tr.Observe(beaconObs(guid(2), ep1, 0))
	o = beaconObs(guid(2), ep1, 0)
	o.Version = 3
	tr.Observe(o)
	evs := r.take()
	if k := kinds(evs); len(k) != 3 || k[0] != EventNew || k[1] != EventChanged || k[2] != EventChanged {
		t.Fatalf("events %v, want [new changed changed]", k)
	}
	if evs[1].GUID != guid(2) || evs[1].OldGUID != guid(1) {
		t.Fatalf("changed event %+v", evs[1])
	}
	if evs[2].Version != 3 || evs[2].OldGUID != guid(2) {
		t.Fatalf("version change event %+v", evs[2])
	}
	if tr.stats.new.Load() != 1 || tr.stats.changed.Load() != 2 || tr.stats.observed.Load() != 5 || tr.Tracked() != 1 {
		t.Fatalf("stats %+v", metrics.Sprint(&tr.stats))
	}
	e, ok := tr.Lookup(ep1, "tcp")
	if !ok || e.GUID != guid(2) || e.ChangeMoves != 0 {
		t.Fatalf("entry %+v", e)
	}
}

func TestChangeCountEvent(t *testing.T) {
	c := clock.NewFake(time.Time{})
	tr, r := newTracker(t, c, 0, 0, 0)
	tr.Observe(beaconObs(guid(1), ep1, 7))
	tr.Observe(beaconObs(guid(1), ep1, 7))
	tr.Observe(beaconObs(guid(1), ep1, 8))
	tr.Observe(beaconObs(guid(1), ep1, 8))
	tr.Observe(beaconObs(guid(1), ep1, 2)) // wraps or resets: still a move
	evs := r.take()
	if k := kinds(evs); len(k) != 3 || k[1] != EventSourcesChanged || k[2] != EventSourcesChanged {
		t.Fatalf("events %v", k)
	}
	if evs[1].ChangeCount != 8 || evs[2].ChangeCount != 2 || evs[1].GUID != guid(1) {
		t.Fatalf("events %+v", evs)
	}
	e, _ := tr.Lookup(ep1, "tcp")
	if e.ChangeMoves != 2 || e.ChangeCount != 2 {
		t.Fatalf("entry %+v", e)
	}
}

func TestDiscoveryTreatedAsBeacon(t *testing.T) {
	c := clock.NewFake(time.Time{})
	tr, r := newTracker(t, c, 360*time.Second, 10*time.Second, 0)
	d := Observation{GUID: guid(1), Endpoint: ep1, Protocol: "tcp", Version: 2, From: from, Via: ViaDiscovery}
	tr.Observe(d)
	evs := r.take()
	if len(evs) != 1 || evs[0].Kind != EventNew || evs[0].Via != ViaDiscovery {
		t.Fatalf("events %+v", evs)
	}
	// A first beacon after discovery sets the change count without an event;
	// a discovery reply (no change count) never moves it.
	c.Advance(300 * time.Second)
	tr.Observe(beaconObs(guid(1), ep1, 5))
	c.Advance(300 * time.Second)
	tr.Observe(d)
	if evs := r.take(); len(evs) != 0 {
		t.Fatalf("unexpected events %v", kinds(evs))
	}
	// The discovery reply refreshed the entry like a beacon: not expired at
	// 600 s after the first sighting.
	if _, ok := tr.Lookup(ep1, "tcp"); !ok {
		t.Fatal("discovery reply did not refresh the entry")
	}
	// A new GUID by discovery is a restart, as by beacon.
	d.GUID = guid(2)
	tr.Observe(d)
	if evs := r.take(); len(evs) != 1 || evs[0].Kind != EventChanged || evs[0].Via != ViaDiscovery {
		t.Fatalf("events %+v", evs)
	}
	c.Advance(360 * time.Second)
	if k := kinds(r.take()); len(k) != 1 || k[0] != EventLost {
		t.Fatalf("events %v, want lost", k)
	}
}

func TestTrackingLimit(t *testing.T) {
	c := clock.NewFake(time.Time{})
	tr, r := newTracker(t, c, 360*time.Second, 10*time.Second, 2)
	tr.Observe(beaconObs(guid(1), ep1, 0))
	tr.Observe(beaconObs(guid(2), ep2, 0))
	ep3 := netip.MustParseAddrPort("127.0.0.3:5075")
	tr.Observe(beaconObs(guid(3), ep3, 0))
	tr.Observe(beaconObs(guid(3), ep3, 0))
	// Known keys still update at the limit.
	tr.Observe(beaconObs(guid(4), ep1, 0))
	if k := kinds(r.take()); len(k) != 3 || k[2] != EventChanged {
		t.Fatalf("events %v", k)
	}
	if tr.stats.dropped.Load() != 2 || tr.Tracked() != 2 || tr.stats.new.Load() != 2 {
		t.Fatalf("stats %+v", metrics.Sprint(&tr.stats))
	}
	// Once an entry expires there is room again.
	c.Advance(360 * time.Second)
	r.take()
	tr.Observe(beaconObs(guid(3), ep3, 0))
	if k := kinds(r.take()); len(k) != 1 || k[0] != EventNew {
		t.Fatalf("events %v", k)
	}
}

func TestProtocolIsPartOfKey(t *testing.T) {
	c := clock.NewFake(time.Time{})
	tr, r := newTracker(t, c, 0, 0, 0)
	tr.Observe(beaconObs(guid(1), ep1, 0))
	o := beaconObs(guid(1), ep1, 0)
	o.Protocol = "tls"
	tr.Observe(o)
	if k := kinds(r.take()); len(k) != 2 || k[1] != EventNew {
		t.Fatalf("events %v", k)
	}
	if n := len(tr.Servers()); n != 2 {
		t.Fatalf("%d entries, want one per protocol", n)
	}
}

func TestEventsOutsideLockAndReentrant(t *testing.T) {
	c := clock.NewFake(time.Time{})
	var tr *Tracker
	var got []EventKind
	tr = New(Options{Clock: c, OnEvent: func(ev Event) {
		got = append(got, ev.Kind)
		_ = tr.Servers() // would deadlock if called under the lock
		if ev.Kind == EventNew {
			// A call from inside OnEvent queues behind the current event.
			tr.Observe(beaconObs(ev.GUID, ev.Endpoint, 1))
		}
	}})
	tr.Observe(beaconObs(guid(1), ep1, 0))
	if len(got) != 2 || got[0] != EventNew || got[1] != EventSourcesChanged {
		t.Fatalf("events %v", got)
	}
}

func TestCloseStopsChecks(t *testing.T) {
	c := clock.NewFake(time.Time{})
	r := &recorder{}
	tr := New(Options{Clock: c, OnEvent: r.on})
	tr.Start()
	tr.Observe(beaconObs(guid(1), ep1, 0))
	tr.Close()
	c.Advance(time.Hour)
	if k := kinds(r.take()); len(k) != 1 {
		t.Fatalf("events after close %v", k)
	}
	if c.Pending() != 0 {
		t.Fatalf("timers pending after Close: %d", c.Pending())
	}
}

func BenchmarkObserveRefresh(b *testing.B) {
	c := clock.NewFake(time.Time{})
	tr := New(Options{Clock: c})
	o := beaconObs(guid(1), ep1, 0)
	tr.Observe(o)
	b.ReportAllocs()
	for b.Loop() {
		tr.Observe(o)
	}
}

// At the limit a new endpoint takes the place of the least recently seen
// entry that nothing proved over TCP; proven entries are never evicted,
// and when every entry is proven the new endpoint is ignored as before.
func TestEvictionAtLimitSparesProven(t *testing.T) {
	c := clock.NewFake(time.Time{})
	r := &recorder{}
	proven := map[netip.AddrPort]bool{ep1: true}
	tr := New(Options{Clock: c, Expiry: time.Hour, CheckInterval: time.Hour, Limit: 2, OnEvent: r.on,
		Proven: func(e Entry) bool { return proven[e.Endpoint] }})
	tr.Start()
	t.Cleanup(tr.Close)
	tr.Observe(beaconObs(guid(1), ep1, 0)) // proven
	c.Advance(time.Second)
	tr.Observe(beaconObs(guid(2), ep2, 0)) // unproven
	ep3 := netip.MustParseAddrPort("127.0.0.3:5075")
	tr.Observe(beaconObs(guid(3), ep3, 0))
	evs := r.take()
	if k := kinds(evs); len(k) != 4 || k[2] != EventEvicted || k[3] != EventNew {
		t.Fatalf("events %v", k)
	}
	if evs[2].Endpoint != ep2 || evs[2].GUID != guid(2) {
		t.Fatalf("evicted %v %v, want the unproven %v", evs[2].GUID, evs[2].Endpoint, ep2)
	}
	if _, ok := tr.Lookup(ep1, "tcp"); !ok {
		t.Fatal("the proven entry was evicted")
	}
	// Every entry proven: the next new endpoint is ignored.
	proven[ep3] = true
	tr.Observe(beaconObs(guid(4), netip.MustParseAddrPort("127.0.0.4:5075"), 0))
	if k := kinds(r.take()); len(k) != 0 {
		t.Fatalf("events %v, want none", k)
	}
	if tr.stats.evicted.Load() != 1 || tr.stats.dropped.Load() != 1 || tr.Tracked() != 2 {
		t.Fatalf("stats %+v", metrics.Sprint(&tr.stats))
	}
}

// direct is a beacon heard from the server's own address.
func direct(g pva.GUID, ep netip.AddrPort) Observation {
	o := beaconObs(g, ep, 0)
	o.From = netip.AddrPortFrom(ep.Addr(), 40000)
	return o
}

// An eviction takes from the sender with the most entries: a flood of
// endpoints from a few addresses, or of hosts named through one (spoofed)
// trusted relay, pushes out its own entries, not a host's one server,
// even one seen before the flood began.
func TestEvictionTakesFromTheBusiestSender(t *testing.T) {
	relay := netip.MustParseAddrPort("10.0.0.200:5076")
	for _, c := range []struct {
		name  string
		flood func(i int) Observation
	}{
		{"many ports of one host", func(i int) Observation {
			return direct(guid(byte(i+1)), netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), uint16(20000+i)))
		}},
		{"many hosts through one relay", func(i int) Observation {
			o := beaconObs(guid(byte(i+1)), netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 5075), 0)
			o.From = relay
			return o
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(time.Time{})
			r := &recorder{}
			tr := New(Options{Clock: clk, Expiry: time.Hour, CheckInterval: time.Hour, Limit: 6, OnEvent: r.on,
				Proven: func(Entry) bool { return false }})
			tr.Start()
			t.Cleanup(tr.Close)
			real := netip.MustParseAddrPort("10.0.0.2:5075")
			tr.Observe(direct(guid(99), real)) // first seen, so the oldest
			for i := range 20 {
				clk.Advance(time.Second)
				tr.Observe(c.flood(i))
				if _, ok := tr.Lookup(real, "tcp"); !ok {
					t.Fatalf("after %d forged endpoints the real server's entry was evicted", i+1)
				}
			}
			if tr.stats.evicted.Load() != 15 || tr.Tracked() != 6 {
				t.Fatalf("stats %+v, want 15 evicted, 6 tracked", metrics.Sprint(&tr.stats))
			}
		})
	}
}

// Zero Options are no expiry, no check and no bound (the daemon passes
// its settings through Apply); Apply's first check interval starts the
// checks of a tracker already started.
func TestZeroOptionsAreOff(t *testing.T) {
	c := clock.NewFake(time.Time{})
	tr, r := newTracker(t, c, 0, 0, 0)
	for i := 1; i <= 3; i++ {
		tr.Observe(beaconObs(guid(byte(i)), netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(i)}), 5075), 0))
	}
	if c.Pending() != 0 {
		t.Fatalf("%d timers pending without a check interval", c.Pending())
	}
	c.Advance(24 * time.Hour)
	if n := tr.Expire(); n != 0 || tr.Tracked() != 3 || tr.stats.dropped.Load() != 0 {
		t.Fatalf("expired %d, stats %+v: want every server kept", n, metrics.Sprint(&tr.stats))
	}
	r.take()
	tr.Apply(Timings{Expiry: time.Hour, CheckInterval: time.Minute})
	c.Advance(time.Minute)
	if k := kinds(r.take()); len(k) != 3 || k[0] != EventLost {
		t.Fatalf("events %v after Apply gave an expiry and a check interval, want 3 lost", k)
	}
}
