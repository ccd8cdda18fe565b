package testutil

import (
	"testing"
	"time"
)

// WaitFor polls f until it reports true and returns how long that took;
// the test fails if d passes first. The poll starts at 1 ms and backs off
// to 20 ms, so quick conditions are seen at once and slow ones (an HTTP
// request per poll) do not spin.
func WaitFor(t testing.TB, d time.Duration, what string, f func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	poll := time.Millisecond
	for !f() {
		if time.Since(start) > d {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(poll)
		poll = min(2*poll, 20*time.Millisecond)
	}
	return time.Since(start)
}
