package testutil

import (
	"sync"
	"sync/atomic"
	"time"
)

// Load starts n workers for a test that needs traffic while it changes
// something. worker(i) runs in the caller's goroutine, so it may fail the
// test, and returns the step worker i repeats, pause apart, until the step
// reports false or the load stops. stop ends the workers, waits for them
// and returns how many steps succeeded.
func Load(n int, pause time.Duration, worker func(i int) (step func() bool)) (stop func() int64) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var steps atomic.Int64
	for i := range n {
		step := worker(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if !step() {
					return
				}
				steps.Add(1)
				time.Sleep(pause)
			}
		}()
	}
	return func() int64 {
		close(done)
		wg.Wait()
		return steps.Load()
	}
}
