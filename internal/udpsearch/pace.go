package udpsearch

import (
	"cmp"
	"container/heap"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/ratelimit"
	"github.com/pvans-project/pvans/internal/twin"
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

// stashFor is how long a reply that would wait beyond maxReplyHold is
// kept, not sent, for a client whose host has a TCP name-server
// connection to pvans: when that connection turns out to be the client's
// own (package twin) the reply goes over it; otherwise it is dropped as it
// would have been. A PVXS client searches again only a whole revolution of
// its ring (6 s) after its name-server connection comes up, so a reply
// lost then costs it 6 s; its connection's copies of the same searches
// follow its UDP datagrams within a tick.
const stashFor = 2 * time.Second

// sendCIDs sends h.buf, a reply naming the channels cids (none: a
// negative answer; their number is its weight for the client's pace). A
// search paired with the client's TCP connection is answered over it,
// unpaced (TCP paces itself) and not charged to the reflection bound (the
// host opened that connection); the socket takes what the connection's
// queue has no room for. It reports whether the reply went (or waits to
// go) to dest over UDP.
func (h *handler) sendCIDs(dest netip.AddrPort, from netip.Addr, pin int, cids []uint32) bool {
	if len(cids) > 0 && h.twin != nil && h.twin.Send(h.buf) {
		h.st.repliesOverTCP.Add(1)
		return false
	}
	if !h.p.refl.Reply(dest.Addr(), len(h.buf)) {
		h.st.reflectionCapped.Add(1)
		return false
	}
	ok, stashed := h.pace.send(h.out, h.buf, dest, from, pin, cids, h.candidate && len(cids) > 0)
	if ok {
		h.st.responses.Add(1)
	}
	if stashed {
		// The pair may have come since pairing looked, its divert run
		// before this reply was stashed.
		if c := h.o.Twins.Paired(dest); c != nil {
			h.pace.divert(dest, c.Send)
		}
	}
	return ok && !stashed
}

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

// send sends b, a reply naming the channels cids, to to now, or holds it
// until the destination's pace allows; ok is false when the reply was
// dropped. A reply beyond the pace to a pairing candidate (stashFor) is
// stashed rather than dropped (stashed).
func (pc *pacing) send(out sender, b []byte, to netip.AddrPort, from netip.Addr, pin int, cids []uint32, candidate bool) (ok, stashed bool) {
	if pc == nil {
		out.reply(b, to, from, pin)
		return true, false
	}
	wait, ok := pc.p.Delay(to, len(cids))
	switch {
	case !ok && candidate:
		ok = pc.q.stash(b, to)
		return ok, ok
	case !ok:
		pc.q.st.dropReplyHold.Add(1)
		return false, false
	case wait == 0:
		out.reply(b, to, from, pin)
		return true, false
	}
	return pc.q.push(b, to, from, pin, wait, cids), false
}

// divert sends the replies held and stashed for to through send instead
// of the socket, in the order they were booked; those send refuses stay.
// It returns how many went.
func (pc *pacing) divert(to netip.AddrPort, send func([]byte) bool) int {
	if pc == nil {
		return 0
	}
	return pc.q.divert(to, send)
}

// unheld returns the cids that no reply held for to names yet (cids
// itself when none is held for to), in scratch.
func (pc *pacing) unheld(to netip.AddrPort, cids []uint32, scratch *[]uint32) []uint32 {
	if pc == nil {
		return cids
	}
	q := pc.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.perDest[to] == 0 {
		return cids
	}
	out := (*scratch)[:0]
	for _, c := range cids {
		if _, held := q.cids[heldCID{to, c}]; !held {
			out = append(out, c)
		}
	}
	*scratch = out
	return out
}

// onPair is the pairing's callback (twin.Table.OnPair): what waits for
// to goes over c.
func (pc *pacing) onPair(to netip.AddrPort, c *twin.Conn) { pc.divert(to, c.Send) }

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

	mu sync.Mutex
	h  heldHeap
	// cids are the channels the held replies name, per destination, and
	// perDest how many replies are held for each: a search repeated while
	// its answer waits is not answered twice. At most max/4 entries (a CID
	// is 4 bytes of a held reply).
	cids    map[heldCID]struct{}
	perDest map[netip.AddrPort]int
	bytes   int
	seq     uint64
	timer   clock.Timer
	armed   time.Time // when timer fires; zero: not armed
	closed  bool
	out     sender // nil until the sockets are open

	sendMu sync.Mutex // one timer callback sends at a time
	due    []heldReply
}

type heldCID struct {
	to  netip.AddrPort
	cid uint32
}

type heldReply struct {
	at   time.Time
	seq  uint64 // order of booking: replies to one client leave in order
	b    []byte
	cids []uint32
	to   netip.AddrPort
	from netip.Addr
	pin  int
	// stash: never sent over UDP; dropped at at unless diverted first.
	stash bool
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

func (q *replyQueue) push(b []byte, to netip.AddrPort, from netip.Addr, pin int, wait time.Duration, cids []uint32) bool {
	return q.add(heldReply{b: b, to: to, from: from, pin: pin}, wait, cids)
}

// stash keeps b for a pair that may come (stashFor). Its CIDs are not
// marked held: a client that turns out not to pair is answered again
// when it searches again, as if the reply had been dropped.
func (q *replyQueue) stash(b []byte, to netip.AddrPort) bool {
	if !q.add(heldReply{b: b, to: to, stash: true}, stashFor, nil) {
		return false
	}
	q.st.repliesStashed.Add(1)
	return true
}

// add books r (b not yet copied) to leave after wait.
func (q *replyQueue) add(r heldReply, wait time.Duration, cids []uint32) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := r.b
	if q.closed || q.bytes+len(b) > q.max {
		q.st.dropReplyQueue.Add(1)
		return false
	}
	at := q.clk.Now().Add(wait)
	q.seq++
	r.at, r.seq, r.b = at, q.seq, append([]byte(nil), b...)
	to := r.to
	if q.cids == nil {
		q.cids, q.perDest = map[heldCID]struct{}{}, map[netip.AddrPort]int{}
	}
	if len(q.cids)+len(cids) <= q.max/4 {
		r.cids = append([]uint32(nil), cids...)
		for _, c := range r.cids {
			q.cids[heldCID{to, c}] = struct{}{}
		}
	}
	q.perDest[to]++
	heap.Push(&q.h, r)
	q.bytes += len(b)
	if !r.stash && wait > 0 {
		q.st.repliesHeld.Add(1) // a re-answer (Reanswer) may be booked to leave at once
	}
	q.arm(at)
	return true
}

func (q *replyQueue) divert(to netip.AddrPort, send func([]byte) bool) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.perDest[to] == 0 {
		return 0
	}
	var mine []heldReply
	kept := q.h[:0]
	for _, r := range q.h {
		if r.to == to {
			mine = append(mine, r)
		} else {
			kept = append(kept, r)
		}
	}
	slices.SortFunc(mine, func(a, b heldReply) int { return cmp.Compare(a.seq, b.seq) })
	n := 0
	for i := range mine {
		r := &mine[i]
		if !send(r.b) {
			kept = append(kept, *r)
			continue
		}
		q.bytes -= len(r.b)
		q.forget(r)
		n++
	}
	clear(q.h[len(kept):])
	q.h = kept
	heap.Init(&q.h)
	q.st.repliesDiverted.Add(uint64(n))
	return n
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
		q.forget(&r)
		q.due = append(q.due, r)
	}
	if len(q.h) > 0 && !q.closed {
		q.arm(q.h[0].at)
	}
	out := q.out
	q.mu.Unlock()
	for i := range q.due {
		if r := &q.due[i]; r.stash {
			q.st.dropReplyHold.Add(1)
		} else if out != nil {
			out.reply(r.b, r.to, r.from, r.pin)
		}
		q.due[i] = heldReply{}
	}
	q.due = q.due[:0]
}

// forget removes r from the held CIDs; q.mu held.
func (q *replyQueue) forget(r *heldReply) {
	for _, c := range r.cids {
		delete(q.cids, heldCID{r.to, c})
	}
	if q.perDest[r.to]--; q.perDest[r.to] <= 0 {
		delete(q.perDest, r.to)
	}
}

// close drops what is held and stops the timer.
func (q *replyQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	if q.timer != nil {
		q.timer.Stop()
	}
	q.h, q.bytes, q.cids, q.perDest = nil, 0, nil, nil
}
