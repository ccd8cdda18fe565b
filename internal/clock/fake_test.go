package clock

import (
	"testing"
	"time"
)

func TestFakeFiresInOrderAndStops(t *testing.T) {
	c := NewFake(time.Time{})
	start := c.Now()
	var got []time.Duration
	c.AfterFunc(2*time.Second, func() { got = append(got, c.Now().Sub(start)) })
	c.AfterFunc(1*time.Second, func() {
		got = append(got, c.Now().Sub(start))
		c.AfterFunc(500*time.Millisecond, func() { got = append(got, c.Now().Sub(start)) })
	})
	stopped := c.AfterFunc(1500*time.Millisecond, func() { t.Error("stopped timer fired") })
	if !stopped.Stop() {
		t.Fatal("Stop of pending timer returned false")
	}
	c.Advance(3 * time.Second)
	want := []time.Duration{time.Second, 1500 * time.Millisecond, 2 * time.Second}
	if len(got) != len(want) {
		t.Fatalf("got %v want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v want %v", got, want)
		}
	}
	if c.Now().Sub(start) != 3*time.Second {
		t.Fatalf("now = %v", c.Now().Sub(start))
	}
	if c.Pending() != 0 {
		t.Fatalf("pending = %d", c.Pending())
	}
}
