package testutil

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// ThreadCPU measures the CPU time of the calling goroutine's thread, for
// benchmarks on a shared, loaded machine: wall time per op counts the
// time the thread waited for a core; thread CPU time does not, nor does it
// count other goroutines (a background digest, GC workers). Start locks the
// goroutine to its thread; Stop returns the CPU time since Start and
// unlocks.
type ThreadCPU struct{ start time.Duration }

// StartThreadCPU locks the goroutine to its thread and starts measuring.
func StartThreadCPU() *ThreadCPU {
	runtime.LockOSThread()
	return &ThreadCPU{start: threadCPU()}
}

// Stop returns the thread's CPU time since StartThreadCPU.
func (t *ThreadCPU) Stop() time.Duration {
	d := threadCPU() - t.start
	runtime.UnlockOSThread()
	return d
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
