package udpsearch

import (
	"container/heap"
	"net/netip"
	"sync"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/ratelimit"
)

// Replies to one client are paced (Options.ReplyRate), in the names they
// answer: a big client's start-up burst draws thousands of replies at
// once, and the client reads them one datagram at a time, opening a
// channel for every name before it reads the next, so its receive buffer
// (the OS default, ~200 datagrams) fills and its kernel drops the rest;
// each dropped reply costs that client a re-search one ring tick (1 s)
// later. Held replies wait in one queue bounded in bytes; a reply that
// would wait beyond maxReplyHold is dropped instead (the client searches
// again by then).
const maxReplyHold = time.Second

// pacing is the search port handlers' reply pacer and its queue.
type pacing struct {
	p *ratelimit.Pacer
	q *replyQueue
}

func newPacing(o *Options, st *counters) *pacing {
	p := ratelimit.NewPacer(ratelimit.PacerOptions{Rate: o.ReplyRate, Burst: o.ReplyBurst,
		MaxDelay: maxReplyHold, Destinations: o.RateSources, Clock: o.Clock})
	if p == nil {
		return nil
	}
	return &pacing{p: p, q: &replyQueue{clk: o.Clock, max: o.ReplyQueueBytes, st: st}}
}

// send sends b, a reply naming names channels, to to now, or holds it
// until the destination's pace allows; it reports false when the reply
// was dropped.
func (pc *pacing) send(out sender, b []byte, to netip.AddrPort, from netip.Addr, pin, names int) bool {
	if pc == nil {
		out.reply(b, to, from, pin)
		return true
	}
	wait, ok := pc.p.Delay(to, names)
	switch {
	case !ok:
		pc.q.st.dropReplyHold.Add(1)
		return false
	case wait == 0:
		out.reply(b, to, from, pin)
		return true
	}
	return pc.q.push(b, to, from, pin, wait)
}

func (pc *pacing) close() {
	if pc != nil {
		pc.q.close()
	}
}

// replyQueue holds delayed replies and sends each when due, through a
// sender of its own, from its timer.
type replyQueue struct {
	clk clock.Clock
	max int // bytes held at most
	st  *counters

	mu     sync.Mutex
	h      heldHeap
	bytes  int
	seq    uint64
	timer  clock.Timer
	armed  time.Time // when timer fires; zero: not armed
	closed bool
	out    sender // nil until the sockets are open

	sendMu sync.Mutex // one timer callback sends at a time
	due    []heldReply
}

type heldReply struct {
	at   time.Time
	seq  uint64 // order of booking: replies to one client leave in order
	b    []byte
	to   netip.AddrPort
	from netip.Addr
	pin  int
}

type heldHeap []heldReply

func (h heldHeap) Len() int { return len(h) }
func (h heldHeap) Less(i, j int) bool {
	return h[i].at.Before(h[j].at) || (h[i].at.Equal(h[j].at) && h[i].seq < h[j].seq)
}
func (h heldHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *heldHeap) Push(x any)   { *h = append(*h, x.(heldReply)) }
func (h *heldHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = heldReply{}
	*h = old[:len(old)-1]
	return r
}

func (q *replyQueue) setSender(out sender) {
	q.mu.Lock()
	q.out = out
	q.mu.Unlock()
}

func (q *replyQueue) push(b []byte, to netip.AddrPort, from netip.Addr, pin int, wait time.Duration) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.bytes+len(b) > q.max {
		q.st.dropReplyQueue.Add(1)
		return false
	}
	at := q.clk.Now().Add(wait)
	q.seq++
	heap.Push(&q.h, heldReply{at: at, seq: q.seq, b: append([]byte(nil), b...), to: to, from: from, pin: pin})
	q.bytes += len(b)
	q.st.repliesHeld.Add(1)
	q.arm(at)
	return true
}

// arm makes the timer fire by at; q.mu held.
func (q *replyQueue) arm(at time.Time) {
	if !q.armed.IsZero() && !at.Before(q.armed) {
		return
	}
	if q.timer != nil {
		q.timer.Stop()
	}
	q.armed = at
	q.timer = q.clk.AfterFunc(max(at.Sub(q.clk.Now()), 0), q.fire)
}

// fire sends every reply that is due and arms the timer for the next.
func (q *replyQueue) fire() {
	q.sendMu.Lock()
	defer q.sendMu.Unlock()
	q.mu.Lock()
	now := q.clk.Now()
	q.armed = time.Time{}
	for len(q.h) > 0 && !q.h[0].at.After(now) {
		r := heap.Pop(&q.h).(heldReply)
		q.bytes -= len(r.b)
		q.due = append(q.due, r)
	}
	if len(q.h) > 0 && !q.closed {
		q.arm(q.h[0].at)
	}
	out := q.out
	q.mu.Unlock()
	for i := range q.due {
		if r := &q.due[i]; out != nil {
			out.reply(r.b, r.to, r.from, r.pin)
		}
		q.due[i] = heldReply{}
	}
	q.due = q.due[:0]
}

// close drops what is held and stops the timer.
func (q *replyQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	if q.timer != nil {
		q.timer.Stop()
	}
	q.h, q.bytes = nil, 0
}
