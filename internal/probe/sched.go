package probe

import (
	"context"
	"net/netip"
	"sync"

	"github.com/pvans-project/pvans/internal/metrics"
)

// sched shares the probe pool (Concurrency slots) between server hosts,
// so that the servers of one host, however many and however slow, cannot
// hold more than their share:
//
//   - a host (server IP) holds at most perHost slots at once;
//   - fresh probes (first attempts, re-listings, confirmations) are served
//     before retries of failed ones, and retries never hold more than half
//     the pool, so a fresh probe waits at most for a fresh one to end;
//   - within a class, hosts take turns (round robin), each host's own
//     probes in order.
//
// A waiting probe is a waiter in a queue, not a goroutine: the prober's
// goroutine for it starts when it is granted (enqueue), so servers named
// by forged beacons that never answer cost the pool's goroutines, however
// many wait. Waiters are bounded by the prober's table (one per server,
// plus the daemon's bounded confirmations).
type sched struct {
	mu      sync.Mutex
	limit   int // slots
	perHost int
	running int
	retries int // slots held by retries
	hosts   map[netip.Addr]*hostQ
	ring    [2][]*hostQ // hosts in turn with waiters of the class, fresh then retry
	waiting int
	// throttled counts probes that had to wait while a slot was free,
	// because their host held its share (or retries held theirs).
	throttled metrics.Counter `metric:"pvans_probe_throttled_total" help:"Probes that waited for a slot while one was free: their server's host held its share (probe.DefaultPerHostConcurrency), or retries of failed probes held half the pool."`
}

const (
	classFresh = iota
	classRetry
)

type hostQ struct {
	addr    netip.Addr
	running int
	q       [2]waitQ
	inRing  [2]bool
}

type waiter struct {
	h       *hostQ
	class   int
	grant   func(*waiter) // called under sched.mu when granted: it may only start a goroutine or signal
	granted bool
	gone    bool // cancelled before it was granted
}

// waitQ is a FIFO of waiters.
type waitQ struct {
	w    []*waiter
	head int
}

func (q *waitQ) push(w *waiter) { q.w = append(q.w, w) }

// peek returns the first live waiter, dropping cancelled ones.
func (q *waitQ) peek() *waiter {
	for q.head < len(q.w) {
		if w := q.w[q.head]; !w.gone {
			return w
		}
		q.pop()
	}
	return nil
}

func (q *waitQ) pop() {
	q.w[q.head] = nil
	q.head++
	if q.head == len(q.w) {
		q.w, q.head = q.w[:0], 0
	} else if q.head > 32 && q.head > len(q.w)/2 {
		q.w = append(q.w[:0], q.w[q.head:]...)
		q.head = 0
	}
}

func newSched(limit, perHost int) *sched {
	return &sched{limit: limit, perHost: perHost, hosts: make(map[netip.Addr]*hostQ)}
}

// setLimits changes the bounds; slots held beyond a lowered bound are kept
// until released.
func (s *sched) setLimits(limit, perHost int) {
	s.mu.Lock()
	if limit > 0 {
		s.limit = limit
	}
	if perHost > 0 {
		s.perHost = perHost
	}
	s.dispatch()
	s.mu.Unlock()
}

// enqueue queues a probe of host: grant(w) is called (under s.mu,
// possibly before enqueue returns) when it holds a slot, which release(w)
// gives back. cancel takes it out of the queue.
func (s *sched) enqueue(host netip.Addr, retry bool, grant func(*waiter)) *waiter {
	class := classFresh
	if retry {
		class = classRetry
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hosts[host]
	if h == nil {
		h = &hostQ{addr: host}
		s.hosts[host] = h
	}
	w := &waiter{h: h, class: class, grant: grant}
	h.q[class].push(w)
	s.waiting++
	s.enring(h, class)
	s.dispatch()
	if !w.granted && s.running < s.limit {
		s.throttled.Add(1)
	}
	return w
}

// cancel takes w out of the queue, and reports whether it was still
// waiting; false: it was granted, and its holder releases the slot.
func (s *sched) cancel(w *waiter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.granted || w.gone {
		return false
	}
	w.gone = true
	s.waiting--
	s.tidy(w.h)
	return true
}

// acquire waits for a slot for a probe of host; release gives it back. It
// fails only when ctx ends first. (For callers that wait in a goroutine of
// their own anyway, and are bounded: the confirmations.)
func (s *sched) acquire(ctx context.Context, host netip.Addr, retry bool) (release func(), ok bool) {
	ch := make(chan struct{})
	w := s.enqueue(host, retry, func(*waiter) { close(ch) })
	select {
	case <-ch:
		return func() { s.release(w) }, true
	case <-ctx.Done():
		if !s.cancel(w) {
			s.release(w) // granted meanwhile
		}
		return nil, false
	}
}

func (s *sched) release(w *waiter) {
	s.mu.Lock()
	s.running--
	w.h.running--
	if w.class == classRetry {
		s.retries--
	}
	for c := range w.h.q {
		s.enring(w.h, c)
	}
	s.dispatch()
	s.tidy(w.h)
	s.mu.Unlock()
}

// enring puts h in the class's turn if it has waiters of it.
func (s *sched) enring(h *hostQ, class int) {
	if !h.inRing[class] && h.q[class].peek() != nil {
		h.inRing[class] = true
		s.ring[class] = append(s.ring[class], h)
	}
}

// tidy drops a host with nothing running or waiting.
func (s *sched) tidy(h *hostQ) {
	if h.running == 0 && !h.inRing[classFresh] && !h.inRing[classRetry] &&
		h.q[classFresh].peek() == nil && h.q[classRetry].peek() == nil {
		delete(s.hosts, h.addr)
	}
}

// dispatch grants free slots: fresh waiters first, then retries (within
// their half of the pool), hosts in turn, each within its share. A host at
// its share leaves the turn until one of its probes ends.
func (s *sched) dispatch() {
	for class := range s.ring {
		r := &s.ring[class]
		for s.running < s.limit && len(*r) > 0 {
			if class == classRetry && s.retries >= max(1, s.limit/2) {
				return
			}
			h := (*r)[0]
			(*r)[0] = nil
			*r = (*r)[1:]
			h.inRing[class] = false
			w := h.q[class].peek()
			if w == nil || h.running >= s.perHost {
				s.tidy(h)
				continue
			}
			h.q[class].pop()
			w.granted = true
			s.waiting--
			s.running++
			h.running++
			if class == classRetry {
				s.retries++
			}
			w.grant(w)
			s.enring(h, class) // back of the turn
		}
		if len(*r) == 0 {
			*r = nil // let the backing array go
		}
	}
}

// schedStats are the scheduler's gauges.
type schedStats struct {
	waiting int
}

func (s *sched) stats() schedStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return schedStats{waiting: s.waiting}
}
