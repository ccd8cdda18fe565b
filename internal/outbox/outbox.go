// Package outbox delivers a component's notifications in order, outside
// the component's lock, from whichever goroutine made them: the beacon
// tracker's events and the prober's sink calls both need callbacks that may
// call back into the component (which would deadlock under its lock) yet
// must not be reordered by racing goroutines.
package outbox

import "sync"

// Outbox queues values under the owner's mutex and drains them with the
// mutex released. Only one goroutine drains at a time; a value pushed by a
// callback during a drain is delivered by that same drain, after the
// values before it. The zero value is ready.
type Outbox[T any] struct {
	queue      []T
	delivering bool
}

// Push queues v. The caller holds the owner's mutex.
func (o *Outbox[T]) Push(v T) { o.queue = append(o.queue, v) }

// Drain delivers everything queued, in order, calling f with mu unlocked.
// The caller must not hold mu. If another goroutine is already draining,
// Drain returns at once and that goroutine delivers the values.
func (o *Outbox[T]) Drain(mu sync.Locker, f func(T)) {
	mu.Lock()
	if o.delivering || len(o.queue) == 0 {
		mu.Unlock()
		return
	}
	o.delivering = true
	for len(o.queue) > 0 {
		q := o.queue
		o.queue = nil
		mu.Unlock()
		for _, v := range q {
			f(v)
		}
		mu.Lock()
	}
	o.delivering = false
	mu.Unlock()
}
