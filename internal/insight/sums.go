package insight

import (
	"hash/maphash"
	"math"
	"math/bits"
	"net/netip"
	"sort"
)

// topN is how many top clients a name keeps.
const topN = 3

type topClient struct {
	addr netip.Addr
	n    uint64
}

// nameInfo is what a name's slot holds besides its count.
type nameInfo struct {
	first, last int64     // unix ns
	clients     [4]uint64 // linear-counting bitmap of client address hashes
	top         [topN]topClient
}

// nameSum is one period's summary of unclaimed names. Names are keyed by
// their 64-bit hash/maphash under the Insight's secret seed (computed once
// per name by the digest, shared by both windows): the map then hashes a
// uint64, not the name, and a slot's name bytes live in a buffer the slot
// keeps and reuses, so taking over a slot allocates nothing. Two names
// with one hash (2^-64 a pair; the seed is not known outside the process)
// share a slot: the later one is not counted.
type nameSum struct {
	c    counts
	seed maphash.Seed
	idx  map[uint64]int32 // name hash → slot
	hash []uint64         // slot → its name's hash
	keys [][]byte         // slot → its name (buffer reused by the slot)
	info []nameInfo
}

func newNameSum(k int, seed maphash.Seed) nameSum {
	return nameSum{c: newCounts(k), seed: seed, idx: make(map[uint64]int32, k), hash: make([]uint64, k),
		keys: make([][]byte, k), info: make([]nameInfo, k)}
}

func (s *nameSum) reset() {
	s.c.reset()
	clear(s.idx)
	clear(s.hash)
	for i := range s.keys {
		s.keys[i] = s.keys[i][:0]
	}
	clear(s.info)
}

func (s *nameSum) full() bool { return len(s.idx) == len(s.keys) }

// slot finds name's slot.
func (s *nameSum) slot(name string) (int32, bool) {
	i, ok := s.idx[maphash.String(s.seed, name)]
	if !ok || string(s.keys[i]) != name {
		return -1, false
	}
	return i, true
}

// add counts n searches for name (h: its hash) by client (ch: the
// client's hash).
func (s *nameSum) add(name []byte, h uint64, client netip.Addr, ch, n uint64, now int64) {
	i, ok := s.idx[h]
	if ok && string(s.keys[i]) != string(name) {
		return // a hash collision: see nameSum
	}
	if !ok {
		var used bool
		i, used = s.c.take()
		if used {
			delete(s.idx, s.hash[i])
		}
		s.keys[i] = append(s.keys[i][:0], name...)
		s.hash[i] = h
		s.idx[h] = i
		s.info[i] = nameInfo{first: now}
	}
	s.c.add(i, n)
	f := &s.info[i]
	f.last = now
	b := ch & 255
	f.clients[b>>6] |= 1 << (b & 63)
	// A 3-slot space-saving of the name's clients.
	m := 0
	for j := range f.top {
		if f.top[j].addr == client {
			f.top[j].n += n
			return
		}
		if f.top[j].n < f.top[m].n {
			m = j
		}
	}
	f.top[m].addr = client
	f.top[m].n += n
}

// remove frees slot i (its name became answerable).
func (s *nameSum) remove(i int32) {
	delete(s.idx, s.hash[i])
	s.hash[i] = 0
	s.keys[i] = s.keys[i][:0]
	s.info[i] = nameInfo{}
	s.c.free(i)
}

// distinct estimates the number of distinct clients from a 256-bit
// linear-counting bitmap: m·ln(m/zeros). With no zero bit left the
// estimate saturates (at least 1,420).
func distinct(b [4]uint64) (int, bool) {
	ones := 0
	for _, w := range b {
		ones += bits.OnesCount64(w)
	}
	const m = 256
	if ones == m {
		return int(m * math.Log(m)), true
	}
	return int(math.Round(m * math.Log(m/float64(m-ones)))), false
}

// topOf merges top-client lists (one per period) into the busiest few,
// and says how many distinct clients the lists name.
func topOf(ts []topClient) ([]TopClient, int) {
	sum := make(map[netip.Addr]uint64, len(ts))
	for _, t := range ts {
		if t.n > 0 {
			sum[t.addr] += t.n
		}
	}
	named := len(sum)
	out := make([]TopClient, 0, len(sum))
	for a, n := range sum {
		out = append(out, TopClient{Addr: a.String(), Searches: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Searches != out[j].Searches {
			return out[i].Searches > out[j].Searches
		}
		return out[i].Addr < out[j].Addr
	})
	if len(out) > topN {
		out = out[:topN]
	}
	return out, named
}

// clientInfo is what a client's slot holds besides its count (names
// searched). These start when the client took its slot.
type clientInfo struct {
	first, last    int64
	searches       uint64 // messages
	names, missing uint64
	tcp, udp       uint64 // messages by transport
}

// clientSum is one period's summary of searching clients.
type clientSum struct {
	c    counts
	idx  map[netip.Addr]int32
	keys []netip.Addr
	info []clientInfo
}

func newClientSum(k int) clientSum {
	return clientSum{c: newCounts(k), idx: make(map[netip.Addr]int32, k), keys: make([]netip.Addr, k), info: make([]clientInfo, k)}
}

func (s *clientSum) reset() {
	s.c.reset()
	clear(s.idx)
	clear(s.keys)
	clear(s.info)
}

func (s *clientSum) full() bool { return len(s.idx) == len(s.keys) }

// add counts one search message, weighted by its names.
func (s *clientSum) add(r *record, now int64) {
	i, ok := s.idx[r.client]
	if !ok {
		var used bool
		i, used = s.c.take()
		if used {
			delete(s.idx, s.keys[i])
		}
		s.keys[i] = r.client
		s.idx[r.client] = i
		s.info[i] = clientInfo{first: now}
	}
	t := uint64(r.times)
	s.c.add(i, t*uint64(r.names))
	f := &s.info[i]
	f.last = now
	f.searches += t
	f.names += t * uint64(r.names)
	f.missing += t * uint64(r.nMissing)
	if r.tcp {
		f.tcp += t
	} else {
		f.udp += t
	}
}
