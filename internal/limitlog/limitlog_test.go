package limitlog

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pvans-project/pvans/internal/clock"
)

func TestOneLinePerInterval(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	clk := clock.NewFake(time.Unix(1000, 0))
	l := New(zap.New(core), 10*time.Second, clk)
	for i := 0; i < 1000; i++ {
		l.Hit("waiters", "waiter limit reached")
	}
	l.Hit("other", "another bound")
	if n := logs.FilterMessage("waiter limit reached").Len(); n != 1 {
		t.Fatalf("%d lines for 1000 hits in one interval, want 1", n)
	}
	clk.Advance(10 * time.Second)
	l.Hit("waiters", "waiter limit reached")
	ls := logs.FilterMessage("waiter limit reached").All()
	if len(ls) != 2 || ls[1].ContextMap()["more_hits_since_last_line"] != uint64(999) {
		t.Fatalf("after the interval: %d lines, %v", len(ls), ls[len(ls)-1].ContextMap())
	}
	if logs.FilterMessage("another bound").Len() != 1 {
		t.Fatal("kinds share an interval")
	}
	var nilLog *Log
	nilLog.Hit("x", "y") // must not panic
}

// TestBackoffNeverSpins: an accept loop failing at once (EMFILE) sleeps
// 5 ms doubling to 1 s and logs one line per interval.
func TestBackoffNeverSpins(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	b := &Backoff{Log: New(zap.New(core), time.Minute, nil), Kind: "tcp_accept"}
	start := time.Now()
	n := 0
	for time.Since(start) < 400*time.Millisecond {
		b.Failed(errors.New("accept: too many open files"), nil)
		n++
	}
	// 5+10+20+40+80+160+320 ms: 7 tries reach 635 ms; a slow machine only
	// makes fewer.
	if n > 8 {
		t.Fatalf("%d accept retries in 400 ms; want a back-off", n)
	}
	if logs.Len() != 1 {
		t.Fatalf("%d log lines, want 1", logs.Len())
	}
	b.OK()
	if b.delay != 0 {
		t.Fatal("OK did not reset the delay")
	}
}
