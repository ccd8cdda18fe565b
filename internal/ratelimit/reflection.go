package ratelimit

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
)

// ReflectionOptions configure a Reflection.
type ReflectionOptions struct {
	// Ratio: reply bytes to an address are at most Ratio × the bytes
	// received from it in the current window; <= 0 makes NewReflection
	// return nil (no cap).
	Ratio float64
	// Window is how long received bytes count. Windows are fixed per
	// address and start at its first datagram after the last expired. 0 =
	// no window: the ratio holds over everything since the address was
	// first seen (or evicted), which still never amplifies.
	Window time.Duration
	// Sources bounds the addresses remembered; 0 = 65536. An evicted
	// address starts again with nothing received, so eviction only ever
	// makes the cap stricter.
	Sources int
	// Exempt addresses are never capped (a trusted gateway, say).
	Exempt []netip.Prefix
	Clock  clock.Clock // nil = the wall clock
}

// Reflection is the anti-amplification account: pvans must never send a
// (possibly spoofed) address more than Ratio times what it received from
// it. Safe for concurrent use.
type Reflection struct {
	ratio  float64
	window time.Duration
	exempt []netip.Prefix
	clk    clock.Clock
	epoch  time.Time

	mu sync.Mutex
	t  table[netip.Addr, account]

	sent, capped, cappedBytes atomic.Uint64
}

type account struct {
	start      time.Duration // window start, since epoch
	recv, sent int64
}

// ReflectionStats are counters for metrics.
type ReflectionStats struct {
	Replies     uint64 // replies allowed
	Capped      uint64 // replies refused by the cap
	CappedBytes uint64 // their bytes
	Sources     int
	Evictions   uint64
}

// NewReflection returns the account, or nil (no cap) when o.Ratio <= 0.
func NewReflection(o ReflectionOptions) *Reflection {
	if !(o.Ratio > 0) {
		return nil
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return &Reflection{ratio: o.Ratio, window: o.Window, exempt: o.Exempt, clk: o.Clock,
		epoch: o.Clock.Now(), t: newTable[netip.Addr, account](o.Sources)}
}

// acct returns a's account with its window rolled; r.mu held.
func (r *Reflection) acct(a netip.Addr, now time.Duration) *account {
	ac, fresh := r.t.get(a)
	if fresh || (r.window > 0 && now-ac.start >= r.window) {
		*ac = account{start: now}
	}
	return ac
}

// Received credits n bytes received from a.
func (r *Reflection) Received(a netip.Addr, n int) {
	if r == nil {
		return
	}
	a = key(a)
	if len(r.exempt) > 0 && exempt(r.exempt, a) {
		return
	}
	now := r.clk.Now().Sub(r.epoch)
	r.mu.Lock()
	r.acct(a, now).recv += int64(n)
	r.mu.Unlock()
}

// Reply reports whether n more reply bytes may go to a, and if so debits
// them.
func (r *Reflection) Reply(a netip.Addr, n int) bool {
	if r == nil {
		return true
	}
	a = key(a)
	if len(r.exempt) > 0 && exempt(r.exempt, a) {
		r.sent.Add(1)
		return true
	}
	now := r.clk.Now().Sub(r.epoch)
	r.mu.Lock()
	ac := r.acct(a, now)
	ok := float64(ac.sent+int64(n)) <= r.ratio*float64(ac.recv)
	if ok {
		ac.sent += int64(n)
	}
	r.mu.Unlock()
	if ok {
		r.sent.Add(1)
	} else {
		r.capped.Add(1)
		r.cappedBytes.Add(uint64(n))
	}
	return ok
}

// Reserve debits n bytes to a, as Reply does, for a reply that may be
// sent later without another charge (the restart fan-out's re-answer of
// an answer just sent, internal/resolver told.go): it reports whether the
// budget had room. It counts no reply.
func (r *Reflection) Reserve(a netip.Addr, n int) bool {
	if r == nil {
		return true
	}
	a = key(a)
	if len(r.exempt) > 0 && exempt(r.exempt, a) {
		return true
	}
	now := r.clk.Now().Sub(r.epoch)
	r.mu.Lock()
	defer r.mu.Unlock()
	ac := r.acct(a, now)
	if float64(ac.sent+int64(n)) > r.ratio*float64(ac.recv) {
		return false
	}
	ac.sent += int64(n)
	return true
}

// Stats returns the counters (zero for a nil Reflection).
func (r *Reflection) Stats() ReflectionStats {
	if r == nil {
		return ReflectionStats{}
	}
	r.mu.Lock()
	n, ev := r.t.len(), r.t.evictions
	r.mu.Unlock()
	return ReflectionStats{Replies: r.sent.Load(), Capped: r.capped.Load(), CappedBytes: r.cappedBytes.Load(),
		Sources: n, Evictions: ev}
}
