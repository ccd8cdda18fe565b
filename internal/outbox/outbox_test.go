package outbox

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

type owner struct {
	mu  sync.Mutex
	box Outbox[int]
	got []int
}

func (o *owner) emit(v int) {
	o.mu.Lock()
	o.box.Push(v)
	o.mu.Unlock()
	o.box.Drain(&o.mu, o.deliver)
}

// deliver re-enters the owner (as a tracker callback calling back into the
// tracker does): the nested value is delivered after the current one, by
// the same drain, without deadlock.
func (o *owner) deliver(v int) {
	o.got = append(o.got, v)
	if v < 3 {
		o.emit(v + 10)
	}
}

func TestOrderAndReentry(t *testing.T) {
	var o owner
	o.mu.Lock()
	o.box.Push(1)
	o.box.Push(2)
	o.mu.Unlock()
	o.box.Drain(&o.mu, o.deliver)
	if want := []int{1, 2, 11, 12}; !slices.Equal(o.got, want) {
		t.Fatalf("delivered %v, want %v", o.got, want)
	}
	o.box.Drain(&o.mu, o.deliver) // nothing queued: no call
	if len(o.got) != 4 {
		t.Fatalf("empty drain delivered %v", o.got)
	}
}

// Values from many goroutines are each delivered exactly once, by one
// drainer at a time.
func TestConcurrentPushers(t *testing.T) {
	var mu sync.Mutex
	var box Outbox[int]
	var active, maxActive atomic.Int32
	seen := map[int]int{} // written only by the single drainer
	deliver := func(v int) {
		n := active.Add(1)
		if n > maxActive.Load() {
			maxActive.Store(n)
		}
		seen[v]++
		runtime.Gosched() // widen the window for a second drainer
		active.Add(-1)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				mu.Lock()
				box.Push(g*1000 + i)
				mu.Unlock()
				box.Drain(&mu, deliver)
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 4000 || maxActive.Load() != 1 {
		t.Fatalf("delivered %d distinct values, max concurrent deliveries %d", len(seen), maxActive.Load())
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("value %d delivered %d times", v, n)
		}
	}
}
