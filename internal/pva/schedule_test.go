package pva

import (
	"testing"
	"time"
)

func TestBeaconScheduleAsPVXS(t *testing.T) {
	var at []time.Duration
	var t0 time.Duration
	for sent := 1; len(at) < 14; sent++ {
		at = append(at, t0)
		t0 += BeaconAfter(sent)
	}
	want := []time.Duration{0, 15, 30, 45, 60, 75, 90, 105, 120, 135, 150, 330, 510, 690}
	for i := range want {
		if at[i] != want[i]*time.Second {
			t.Fatalf("beacon %d leaves at %v, want %v (all: %v)", i+1, at[i], want[i]*time.Second, at)
		}
	}
}
