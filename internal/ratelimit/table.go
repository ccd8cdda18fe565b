package ratelimit

import "net/netip"

// DefaultSources is the default number of source addresses remembered.
const DefaultSources = 65536

// table is a fixed-capacity map from source address to V that evicts the
// least recently used entry when full, so a flood of spoofed sources costs
// at most max entries and never grows the heap. Not safe for concurrent
// use: the owner locks.
type table[K comparable, V any] struct {
	idx        map[K]int32
	ents       []entry[K, V]
	head, tail int32 // most and least recently used; -1 when empty
	max        int
	evictions  uint64
}

type entry[K comparable, V any] struct {
	addr       K
	prev, next int32
	v          V
}

func newTable[K comparable, V any](max int) table[K, V] {
	if max <= 0 {
		max = DefaultSources
	}
	// Grown on demand: an idle daemon does not pay for the whole table.
	return table[K, V]{idx: make(map[K]int32), head: -1, tail: -1, max: max}
}

// key folds the forms one host can take (IPv4-mapped IPv6, zones) into
// one source.
func key(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// get returns a's value, marking it most recently used. fresh reports a
// new (zeroed) entry, possibly one that evicted the oldest source.
func (t *table[K, V]) get(a K) (v *V, fresh bool) {
	if i, ok := t.idx[a]; ok {
		t.touch(i)
		return &t.ents[i].v, false
	}
	var i int32
	if len(t.ents) < t.max {
		i = int32(len(t.ents))
		t.ents = append(t.ents, entry[K, V]{prev: -1, next: -1})
	} else {
		i = t.tail
		t.unlink(i)
		delete(t.idx, t.ents[i].addr)
		t.evictions++
	}
	var zero V
	t.ents[i].addr, t.ents[i].v = a, zero
	t.idx[a] = i
	t.pushFront(i)
	return &t.ents[i].v, true
}

func (t *table[K, V]) len() int { return len(t.idx) }

func (t *table[K, V]) touch(i int32) {
	if t.head == i {
		return
	}
	t.unlink(i)
	t.pushFront(i)
}

func (t *table[K, V]) unlink(i int32) {
	e := &t.ents[i]
	if e.prev >= 0 {
		t.ents[e.prev].next = e.next
	} else {
		t.head = e.next
	}
	if e.next >= 0 {
		t.ents[e.next].prev = e.prev
	} else {
		t.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

func (t *table[K, V]) pushFront(i int32) {
	e := &t.ents[i]
	e.prev, e.next = -1, t.head
	if t.head >= 0 {
		t.ents[t.head].prev = i
	}
	t.head = i
	if t.tail < 0 {
		t.tail = i
	}
}

func exempt(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
