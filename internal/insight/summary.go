package insight

// counts is the space-saving core shared by the name and client summaries:
// k slots, each with a count and the error it inherited when it took over
// another key's slot, kept in a min-heap on count so the slot to give away
// is always at the root. The caller keeps the key→slot map and the payload;
// this only orders the slots. Every slice is allocated once, at start.
type counts struct {
	count []uint64
	err   []uint64 // overestimate bound of count (the evicted minimum)
	used  []bool
	heap  []int32 // slot numbers, min-heap on count
	pos   []int32 // slot → index in heap
	total uint64  // weight counted since the last reset (N in the bound)
	evict uint64  // keys that lost their slot to another
}

func newCounts(k int) counts {
	c := counts{count: make([]uint64, k), err: make([]uint64, k), used: make([]bool, k),
		heap: make([]int32, k), pos: make([]int32, k)}
	c.reset()
	return c
}

// reset empties every slot without allocating.
func (c *counts) reset() {
	clear(c.count)
	clear(c.err)
	clear(c.used)
	for i := range c.heap {
		c.heap[i], c.pos[i] = int32(i), int32(i)
	}
	c.total = 0
}

// take returns the slot a new key gets: the one with the smallest count
// (an unused one while any is left). The new key inherits that count as
// its error: space-saving's rule, which makes every count an overestimate
// by at most err ≤ total/k. wasUsed says the caller must unmap the slot's
// old key.
func (c *counts) take() (slot int32, wasUsed bool) {
	slot = c.heap[0]
	wasUsed = c.used[slot]
	if wasUsed {
		c.evict++
	}
	c.used[slot] = true
	c.err[slot] = c.count[slot]
	return slot, wasUsed
}

// add credits w to slot and restores the heap (counts only grow, so the
// slot can only move down; a heavy key is already near the bottom).
func (c *counts) add(slot int32, w uint64) {
	c.count[slot] += w
	c.total += w
	c.down(int(c.pos[slot]))
}

// free gives a slot back (its key resolved): count 0, to the root.
func (c *counts) free(slot int32) {
	c.used[slot] = false
	c.count[slot], c.err[slot] = 0, 0
	i := int(c.pos[slot])
	for i > 0 {
		p := (i - 1) / 2
		c.swap(i, p)
		i = p
	}
}

// min is the smallest count: the most a key absent from the summary can
// have been counted.
func (c *counts) min() uint64 { return c.count[c.heap[0]] }

func (c *counts) down(i int) {
	n := len(c.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && c.count[c.heap[r]] < c.count[c.heap[l]] {
			m = r
		}
		if c.count[c.heap[m]] >= c.count[c.heap[i]] {
			return
		}
		c.swap(i, m)
		i = m
	}
}

func (c *counts) swap(i, j int) {
	c.heap[i], c.heap[j] = c.heap[j], c.heap[i]
	c.pos[c.heap[i]] = int32(i)
	c.pos[c.heap[j]] = int32(j)
}
