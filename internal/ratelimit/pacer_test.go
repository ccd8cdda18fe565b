package ratelimit

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
)

// A destination takes its burst at once; each later event is due one
// interval after the one before, whatever the moment it is booked; a
// pause refills the burst; another port of the same host is another
// destination; a wait beyond MaxDelay is refused and books nothing.
func TestPacerSpacesEvents(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	p := NewPacer(PacerOptions{Rate: 1000, Burst: 3, MaxDelay: 5 * time.Millisecond, Clock: clk})
	a := netip.MustParseAddrPort("192.0.2.1:5076")
	want := []time.Duration{0, 0, 0, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond,
		4 * time.Millisecond, 5 * time.Millisecond}
	for i, w := range want {
		if got, ok := p.Delay(a, 1); !ok || got != w {
			t.Fatalf("event %d: wait %v ok %v, want %v", i, got, ok, w)
		}
	}
	if _, ok := p.Delay(a, 1); ok {
		t.Fatal("a wait of 6 ms beyond MaxDelay 5 ms was booked")
	}
	if got, _ := p.Delay(netip.MustParseAddrPort("192.0.2.1:5077"), 1); got != 0 {
		t.Fatal("another port waited for the first one's queue")
	}
	clk.Advance(2 * time.Millisecond)
	if got, ok := p.Delay(a, 1); !ok || got != 4*time.Millisecond {
		t.Fatalf("after 2 ms: wait %v, want 4 ms (the refused event booked nothing)", got)
	}
	clk.Advance(time.Second)
	for i := range 3 {
		if got, _ := p.Delay(a, 1); got != 0 {
			t.Fatalf("after a pause, event %d waits %v", i, got)
		}
	}
	if st := p.Stats(); st.Held != 6 || st.Refused != 1 || st.Destinations != 2 {
		t.Fatalf("stats %+v", st)
	}
	var off *Pacer = NewPacer(PacerOptions{})
	if w, ok := off.Delay(a, 1); off != nil || w != 0 || !ok {
		t.Fatal("rate 0 must mean no pacing")
	}
}

// An event worth n tokens waits until all n fit: a destination paced in
// names takes its burst of names at once, however they are packed.
func TestPacerCost(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	p := NewPacer(PacerOptions{Rate: 1000, Burst: 100, Clock: clk})
	a := netip.MustParseAddrPort("192.0.2.1:5076")
	for i, c := range []struct {
		n    int
		want time.Duration
	}{{60, 0}, {40, 0}, {10, 10 * time.Millisecond}, {1, 11 * time.Millisecond}, {0, 12 * time.Millisecond}} {
		if got, ok := p.Delay(a, c.n); !ok || got != c.want {
			t.Fatalf("event %d (%d tokens): wait %v ok %v, want %v", i, c.n, got, ok, c.want)
		}
	}
	if _, ok := p.Delay(a, 1<<62); ok {
		t.Fatal("a huge cost was booked")
	}
}
