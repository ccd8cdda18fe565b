package ratelimit

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
)

// Repeats are priced apart from new names (docs/SECURITY.md, "Repeated
// searches"). A Phoebus (Java) client starts a search round for every
// channel it opens, and each round searches again every channel not yet
// connected: opening 1,000 channels sent 1,125 TCP messages carrying
// 44,287 names. Every one of those names but the first of each is a name
// the same source searched a moment before, whose lookup it already paid
// for.
const (
	// RepeatWindow is how long a name a source paid for is a repeat when
	// that source searches it again: longer than a big client takes to
	// connect what it opened (the 50,000-channel Phoebus start-up took
	// about 5 s).
	RepeatWindow = 10 * time.Second
	// RepeatShare: a repeat costs 1/RepeatShare of a new name, so a source
	// that only repeats is still bounded, at RepeatShare times the rate of
	// new names it may send.
	RepeatShare = 64
	// RepeatMinNames: a source's repeats are priced as such only while it
	// has at least this many names remembered. Repeats matter for a client
	// opening many channels at once; a source that searches a handful of
	// names over and over (a retry loop, a flood of one search) pays full
	// price for every one, as before.
	RepeatMinNames = 256
	// RepeatNamesPerSource bounds the names remembered for one source:
	// above a 50,000-channel start-up. A name not remembered is priced
	// as new, as it was before repeats were.
	RepeatNamesPerSource = 65536
	// RepeatNamesTotal bounds the names remembered for all sources (~80
	// bytes each: 10 MiB); when it is reached the oldest go first.
	RepeatNamesTotal = 131072
)

// Recent remembers, per source, the names it paid for within
// RepeatWindow, so that a search repeating them can be priced as a
// repeat. Memory grows on demand to at most RepeatNamesPerSource names a
// source and RepeatNamesTotal in all; a name it could not keep is simply
// priced as new next time, so a full memory only makes searches dearer.
// Safe for concurrent use; a nil *Recent remembers nothing.
type Recent struct {
	seed  maphash.Seed
	clk   clock.Clock
	epoch time.Time
	// evicted counts the names forgotten before their RepeatWindow ended
	// because the memory held RepeatNamesTotal: an operator seeing it
	// grow knows repeats are priced as new (a flood, or more busy clients
	// at once than the bound was sized for).
	evicted *metrics.Counter
	// minNames, per, total: RepeatMinNames, RepeatNamesPerSource,
	// RepeatNamesTotal (smaller in tests).
	minNames, per, total int

	mu sync.Mutex
	// idx finds a (source, name) key's entry in ring, which holds the
	// entries oldest first (start, n: a circular buffer grown on demand).
	idx      map[uint64]int32
	ring     []recentEntry
	start, n int
	count    map[netip.Addr]int32 // entries per source
}

type recentEntry struct {
	key uint64
	src netip.Addr
	at  time.Duration // since epoch
}

// NewRecent returns an empty memory; clk nil means the wall clock.
// evicted is where it counts the names it forgot early to stay within
// RepeatNamesTotal (its owner declares and exports it); nil: a count of
// its own, read by nobody.
func NewRecent(clk clock.Clock, evicted *metrics.Counter) *Recent {
	return newRecent(clk, evicted, RepeatMinNames, RepeatNamesPerSource, RepeatNamesTotal)
}

func newRecent(clk clock.Clock, evicted *metrics.Counter, minNames, per, total int) *Recent {
	if clk == nil {
		clk = clock.Real{}
	}
	if evicted == nil {
		evicted = new(metrics.Counter)
	}
	return &Recent{seed: maphash.MakeSeed(), clk: clk, epoch: clk.Now(), evicted: evicted, minNames: minNames, per: per, total: total,
		idx: map[uint64]int32{}, count: map[netip.Addr]int32{}}
}

// Price splits n names (name(i) is the i-th) searched by src into
// repeats, names src paid for within RepeatWindow, and new ones, whose
// keys it appends to fresh[:0] for Remember once they are paid for. A
// source with fewer than RepeatMinNames names remembered has no repeats.
func (r *Recent) Price(src netip.Addr, n int, name func(int) []byte, fresh []uint64) (repeats int, _ []uint64) {
	fresh = fresh[:0]
	if r == nil {
		return 0, fresh
	}
	src = key(src)
	a := src.As16()
	s := maphash.Bytes(r.seed, a[:])
	for i := range n {
		fresh = append(fresh, maphash.Bytes(r.seed, name(i))^s)
	}
	now := r.clk.Now().Sub(r.epoch)
	r.mu.Lock()
	k := 0
	for _, h := range fresh {
		if i, ok := r.idx[h]; ok && r.ring[i].src == src && now-r.ring[i].at < RepeatWindow {
			repeats++
			continue
		}
		fresh[k] = h
		k++
	}
	if int(r.count[src]) < r.minNames {
		repeats = 0
	}
	r.mu.Unlock()
	return repeats, fresh[:k]
}

// Remember records the keys Price returned as paid for by src now, as
// far as the bounds allow.
func (r *Recent) Remember(src netip.Addr, keys []uint64) {
	if r == nil || len(keys) == 0 {
		return
	}
	src = key(src)
	now := r.clk.Now().Sub(r.epoch)
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.n > 0 && now-r.ring[r.start].at >= RepeatWindow {
		r.evict()
	}
	for _, h := range keys {
		if int(r.count[src]) >= r.per {
			break
		}
		if i, ok := r.idx[h]; ok && r.ring[i].src == src {
			// Already remembered (a name listed twice in one search):
			// RepeatMinNames and the bounds count distinct names.
			continue
		}
		if r.n == r.total {
			r.evict()
			r.evicted.Add(1)
		}
		if r.n == len(r.ring) {
			r.grow()
		}
		i := (r.start + r.n) % len(r.ring)
		r.ring[i] = recentEntry{key: h, src: src, at: now}
		r.idx[h] = int32(i)
		r.n++
		r.count[src]++
	}
}

// evict forgets the oldest entry.
func (r *Recent) evict() {
	e := &r.ring[r.start]
	if i, ok := r.idx[e.key]; ok && int(i) == r.start {
		delete(r.idx, e.key)
	}
	if r.count[e.src]--; r.count[e.src] <= 0 {
		delete(r.count, e.src)
	}
	r.start = (r.start + 1) % len(r.ring)
	r.n--
}

// grow doubles the ring (up to total), oldest entry first.
func (r *Recent) grow() {
	ring := make([]recentEntry, min(max(2*len(r.ring), 1024), r.total))
	for j := range r.n {
		ring[j] = r.ring[(r.start+j)%len(r.ring)]
		r.idx[ring[j].key] = int32(j)
	}
	r.ring, r.start = ring, 0
}

// Len is the number of names remembered now.
func (r *Recent) Len() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}
