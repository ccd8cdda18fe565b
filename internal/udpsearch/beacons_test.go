package udpsearch

import (
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
)

// The schedule of docs/protocol.md, "The beacon schedule": t = 0, 15, …,
// 150, then 330, 510, …
func TestBeaconSchedule(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	start := clk.Now()
	var at []time.Duration
	var seqs []uint8
	var counts []uint16
	b := newBeaconer(clk, ownGUID, 5075, func(msg []byte) {
		at = append(at, clk.Now().Sub(start))
		h, p, _, err := pva.SplitMessage(msg)
		var m pva.Beacon
		if err != nil || m.Decode(p, h.BigEndian()) != nil {
			t.Fatalf("bad beacon %x", msg)
		}
		seqs = append(seqs, m.Sequence)
		counts = append(counts, m.ChangeCount)
	})
	b.start()
	clk.Advance(100 * time.Second)
	b.bump()
	clk.Advance(410 * time.Second) // to t = 510
	var want []time.Duration
	for i := range 11 {
		want = append(want, time.Duration(i)*15*time.Second)
	}
	want = append(want, 330*time.Second, 510*time.Second)
	if len(at) != len(want) {
		t.Fatalf("beacons at %v, want %v", at, want)
	}
	for i := range want {
		if at[i] != want[i] || seqs[i] != uint8(i) {
			t.Fatalf("beacon %d at %v seq %d; want %v seq %d", i, at[i], seqs[i], want[i], i)
		}
		wantCount := uint16(0)
		if i >= 7 { // bumped at t=100, after the beacon at t=90
			wantCount = 1
		}
		if counts[i] != wantCount {
			t.Fatalf("beacon %d change count %d, want %d", i, counts[i], wantCount)
		}
	}
	b.stop()
	clk.Advance(time.Hour)
	if len(at) != len(want) || clk.Pending() != 0 {
		t.Fatalf("beacons after stop: %d, pending timers %d", len(at)-len(want), clk.Pending())
	}
}
