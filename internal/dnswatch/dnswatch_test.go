package dnswatch

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
)

// fakeDNS answers from a table the test edits.
type fakeDNS struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	fail    map[string]bool
	asked   int
	block   chan struct{} // non-nil: lookups wait for ctx or a close
}

func (f *fakeDNS) LookupNetIP(ctx context.Context, _, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	f.asked++
	a, failed, block := f.answers[host], f.fail[host], f.block
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if failed {
		return nil, errors.New("SERVFAIL")
	}
	return a, nil
}

func (f *fakeDNS) set(host string, addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var l []netip.Addr
	for _, s := range addrs {
		l = append(l, netip.MustParseAddr(s))
	}
	f.answers[host] = l
}

func addrs(s ...string) []netip.Addr {
	var l []netip.Addr
	for _, x := range s {
		l = append(l, netip.MustParseAddr(x))
	}
	return l
}

type harness struct {
	w       *Watcher
	set     Settings
	dns     *fakeDNS
	clk     *clock.Fake
	changed chan struct{}
}

func newHarness(t *testing.T, set Settings) *harness {
	h := &harness{dns: &fakeDNS{answers: map[string][]netip.Addr{}, fail: map[string]bool{}},
		clk: clock.NewFake(time.Unix(1000, 0)), changed: make(chan struct{}, 16)}
	h.w = New(Options{Resolver: h.dns, Clock: h.clk, Changed: func() { h.changed <- struct{}{} }})
	h.set = set
	h.w.Apply(set)
	t.Cleanup(h.w.Close)
	return h
}

// follow applies the harness's settings with names as the names followed.
func (h *harness) follow(names ...string) {
	h.set.Names = names
	h.w.Apply(h.set)
}

// settle waits until the round under way has finished (its next timer is
// armed, or none is due).
func (h *harness) settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.w.mu.Lock()
		running := h.w.running
		h.w.mu.Unlock()
		if !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("round did not finish")
		}
		time.Sleep(time.Millisecond)
	}
}

// A name is followed with all its addresses: changes are reported once a
// refresh round sees them, a failed lookup keeps the last answer.
func TestFollowsAnswers(t *testing.T) {
	h := newHarness(t, Settings{Refresh: 30 * time.Second, Timeout: time.Second, Concurrency: 2, MaxNames: 10, MaxAddresses: 8})
	h.dns.set("ioc.example", "10.0.0.5", "fd00::5", "10.0.0.4")
	h.follow("ioc.example")
	if _, ok := h.w.Addrs("ioc.example"); ok {
		t.Error("an answer before the first lookup")
	}
	h.w.Start()
	h.settle(t)
	<-h.changed
	got, ok := h.w.Addrs("ioc.example")
	if !ok || !slices.Equal(got, addrs("10.0.0.4", "10.0.0.5", "fd00::5")) {
		t.Fatalf("Addrs = %v %v", got, ok)
	}

	// The pod restarts under another address: seen at the next refresh,
	// not before.
	h.dns.set("ioc.example", "10.0.0.9")
	h.clk.Advance(29 * time.Second)
	h.settle(t)
	if got, _ := h.w.Addrs("ioc.example"); len(got) != 3 {
		t.Fatalf("changed before the refresh: %v", got)
	}
	h.clk.Advance(time.Second)
	h.settle(t)
	<-h.changed
	if got, _ := h.w.Addrs("ioc.example"); !slices.Equal(got, addrs("10.0.0.9")) {
		t.Fatalf("after refresh %v", got)
	}

	// DNS fails: the last answer is kept, counted, no change reported.
	h.dns.mu.Lock()
	h.dns.fail["ioc.example"] = true
	h.dns.mu.Unlock()
	h.clk.Advance(30 * time.Second)
	h.settle(t)
	h.clk.Advance(30 * time.Second)
	h.settle(t)
	if got, _ := h.w.Addrs("ioc.example"); !slices.Equal(got, addrs("10.0.0.9")) {
		t.Fatalf("a failed lookup changed the answer: %v", got)
	}
	select {
	case <-h.changed:
		t.Error("a failed lookup reported a change")
	default:
	}
	// An empty answer is a failure too, not "no addresses any more".
	h.dns.mu.Lock()
	h.dns.fail["ioc.example"] = false
	h.dns.mu.Unlock()
	h.dns.set("ioc.example")
	h.clk.Advance(30 * time.Second)
	h.settle(t)
	if h.w.failures.Load() != 3 || h.w.changes.Load() != 1 || h.w.lookups.Load() != 5 || h.w.Names() != 1 {
		t.Errorf("stats %+v", metrics.Sprint(&h.w.counters))
	}
	if got, _ := h.w.Addrs("ioc.example"); !slices.Equal(got, addrs("10.0.0.9")) {
		t.Fatalf("an empty answer changed the answer: %v", got)
	}
}

// The bounds: names beyond MaxNames are not looked up, addresses beyond
// MaxAddresses are dropped, a lookup that hangs ends at Timeout, and at
// most Concurrency lookups run at once.
func TestBounds(t *testing.T) {
	h := newHarness(t, Settings{Refresh: time.Minute, Timeout: 50 * time.Millisecond, Concurrency: 1, MaxNames: 2, MaxAddresses: 2})
	h.dns.set("a", "10.0.0.3", "10.0.0.1", "10.0.0.2")
	h.dns.set("b", "10.0.1.1")
	h.dns.set("c", "10.0.2.1")
	h.follow("a", "b", "c")
	h.w.Start()
	h.settle(t)
	if got, _ := h.w.Addrs("a"); !slices.Equal(got, addrs("10.0.0.1", "10.0.0.2")) {
		t.Errorf("a = %v", got)
	}
	if _, ok := h.w.Addrs("c"); ok {
		t.Error("a name beyond max_names was looked up")
	}
	if h.w.namesDropped.Load() != 1 || h.w.addrsDropped.Load() != 1 || h.w.Names() != 2 {
		t.Errorf("stats %+v", metrics.Sprint(&h.w.counters))
	}

	// A DNS server that never answers: the round ends at the timeout,
	// one lookup at a time, and the answers stay.
	h.dns.mu.Lock()
	h.dns.block = make(chan struct{})
	h.dns.mu.Unlock()
	start := time.Now()
	h.clk.Advance(time.Minute)
	h.settle(t)
	// At least both timeouts, one after the other; the upper bound is a
	// hang guard (a loaded machine adds any delay to it).
	if took := time.Since(start); took < 100*time.Millisecond || took > 60*time.Second {
		t.Errorf("two hanging lookups, one at a time, took %s (timeout 50ms each)", took)
	}
	if got, _ := h.w.Addrs("b"); !slices.Equal(got, addrs("10.0.1.1")) {
		t.Errorf("b after timeouts = %v", got)
	}
}

// Names taken off the list are forgotten; Refresh during a round runs
// another right after it.
func TestApplyNames(t *testing.T) {
	h := newHarness(t, Settings{Refresh: time.Minute, Timeout: time.Second, Concurrency: 4, MaxNames: 10, MaxAddresses: 10})
	h.dns.set("a", "10.0.0.1")
	h.dns.set("b", "10.0.0.2")
	h.follow("a", "b")
	h.w.Start()
	h.settle(t)
	h.follow("b")
	if _, ok := h.w.Addrs("a"); ok {
		t.Error("a kept after it left the list")
	}
	if _, ok := h.w.Addrs("b"); !ok {
		t.Error("b lost its answer")
	}
	before := h.w.lookups.Load()
	h.w.Refresh()
	h.w.Refresh()
	h.settle(t)
	h.settle(t)
	if n := h.w.lookups.Load() - before; n < 1 || n > 2 {
		t.Errorf("%d lookups after two Refresh calls", n)
	}
}
