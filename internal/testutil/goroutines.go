package testutil

import (
	"runtime"
	"testing"
	"time"
)

// CheckGoroutines fails the test if goroutines started during it are
// still running 10 s after it ends, and logs every stack if so.
func CheckGoroutines(t testing.TB) {
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > base {
			buf := make([]byte, 1<<20)
			t.Errorf("goroutines: %d at start, %d at end\n%s", base, n, buf[:runtime.Stack(buf, true)])
		}
	})
}
