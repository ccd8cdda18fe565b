package searchring

import (
	"fmt"
	"testing"
	"time"
)

// TestBoundedChannelsAndDatagramRate is the search-through half of the
// issue-14 row "six TCP connections send searches for 600,000 distinct
// missing names": every waited name was searched through, 16,722
// broadcast datagrams in 40 s with peaks of 1,945 datagrams/s. The ring
// remembers at most MaxChannels names and sends at most DatagramsPerSecond
// (with a burst of as many) whatever it is asked; the rest is counted.
func TestBoundedChannelsAndDatagramRate(t *testing.T) {
	const maxCh, rate = 1000, 20
	r, clk, rc := newTestRing(t, Options{MaxChannels: maxCh, DatagramsPerSecond: rate})
	rc.countOnly = true
	for i := 0; i < 20000; i++ {
		r.Want(fmt.Sprintf("attack:missing:%06d", i))
	}
	st := r.Stats()
	if st.Channels != maxCh || r.ctr.refused.Load() != 20000-maxCh {
		t.Fatalf("channels %d refused %d; want %d and %d", st.Channels, r.ctr.refused.Load(), maxCh, 20000-maxCh)
	}
	// 40 s of ticks (a hurry-up included, the fastest schedule).
	r.Poke(PokeOperator)
	worst := 0
	for s := 0; s < 40; s++ {
		before := rc.sent()
		for k := 0; k < 5; k++ {
			clk.Advance(200 * time.Millisecond)
		}
		worst = max(worst, rc.sent()-before)
	}
	if total := rc.sent(); total > rate*41 {
		t.Fatalf("%d datagrams in 40 s; want at most %d", total, rate*41)
	}
	if worst > 2*rate {
		t.Fatalf("peak %d datagrams in one second; want at most the burst %d", worst, 2*rate)
	}
	if r.ctr.limited.Load() == 0 {
		t.Fatal("datagrams held back by the rate limit not counted")
	}
	// A dropped name frees its room (after the sweep): a new one is taken.
	r.Drop("attack:missing:000000")
	clk.Advance(2 * DefaultSweepDelay)
	r.Want("good:name")
	if st := r.Stats(); r.ctr.refused.Load() != 20000-maxCh {
		t.Fatalf("room freed by the sweep not reused: %+v", st)
	}
}
