package insight

import (
	"encoding/binary"
	"hash/maphash"
	"math/rand/v2"
	"net/netip"
	"sync"

	"github.com/pvans-project/pvans/internal/pva"
)

// The answer path only copies: each search message becomes one record in a
// fixed-size staging buffer (client, transport, counts, the names nobody
// claimed), and the digest folds the records into the summaries later, off
// the answer path. A full buffer drops the record and counts it; it never
// grows and never blocks the answer.
//
// Record layout (native byte order, it never leaves the process):
//
//	[16]client address | u8 flags | u16 names | u16 found | u16 missing |
//	u16 repeats | u16 weight |
//	full:  u16 count | u16 data length | count × u16 (length | 0x8000
//	       if unclaimed) | data
//	light: nothing more
//
// data is the names one after another, or (flagWire) the stretch of the
// search payload from the first unclaimed name to the end of the last:
// the names are views into it, so it is copied in one go, with the
// found names between and each name's CID and size, which the digest
// skips knowing each name's length. That is the answer path's case; it
// is sliced at the names' offsets in the payload (pva.SearchName.Off) and
// taken only if both ends are the names' own bytes (&payload[i] ==
// &name[0]) and the names fill it, else the unclaimed names are copied
// one by one.
//
// Beyond the digest's budget (see sampler) the answer path itself samples:
// a search with unclaimed names is staged in full with probability p (the
// rate the last digest published) and then carries weight ≈ 1/p; otherwise
// it is staged "light", its counts without its names, for the client
// summaries, which stay exact. In a storm the answer path then copies a
// header instead of the names. A search identical to the shard's previous
// record from the same client (a retry, a storm) only bumps that record's
// repeats, and is nothing new for the digest.
const (
	recHeader = 16 + 1 + 2 + 2 + 2 + 2 + 2
	offFlags  = 16
	offNames  = 17
	offFound  = 19
	offMiss   = 21
	offRepeat = 23
	offWeight = 25
	flagTCP   = 1
	flagWire  = 2
	flagLight = 8
	unclaimed = 0x8000 // in a name's length
	// shards spread TCP sessions (one goroutine each) over independent
	// locks; the UDP receive loop is one goroutine.
	shards = 4
	// minStage is the smallest staging buffer, whatever QueueBytes says:
	// room for a few records of the longest name (maxName).
	minStage = 4096
)

type stage struct {
	mu       sync.Mutex
	buf      []byte // cap fixed at start
	last     int    // offset of the last record in buf; -1: none
	signaled bool
	found    uint64 // names answered found (all records, staged or not)
	missing  uint64 // names nobody claimed
	// staged and stagedFull are the unclaimed names of the records in buf
	// (all, and in records staged in full; repeats not counted: they cost
	// the digest nothing per name), for the digest's rate estimates.
	staged, stagedFull int
	dropped            uint64 // missing names not staged: buffer full
	_                  [64]byte
}

// Searched records one search message as the answer path saw it: the
// client, whether it came over TCP, the payload its names were decoded
// from (pva.Search.Decode leaves them as views into it; nil if not), the
// names, the indexes of those nobody claims in increasing order
// (resolver.Batch.Missing) and how many were answered found. The
// unclaimed names are copied (with the payload's stretch they span when
// they are views into it); nothing is kept. It is safe for concurrent
// use and never blocks on the digest.
func (in *Insight) Searched(client netip.Addr, tcp bool, payload []byte, names []pva.SearchName, missing []int, found int) {
	if in == nil {
		return
	}
	h := header{client: client.As16(), names: clamp16(len(names)), found: clamp16(found), missing: uint16(len(missing)), weight: 1}
	if tcp {
		h.flags = flagTCP
	}
	if len(missing) == 0 {
		h.flags |= flagLight // no names: the header is the record
	} else {
		if p := in.stageRate(); p < 1 {
			if rand.Float64() >= p {
				h.flags |= flagLight
			} else {
				h.weight = stageWeight(p, rand.Float64())
			}
		}
	}
	s := &in.stages[int(h.client[15])%shards]
	s.mu.Lock()
	s.found += uint64(found)
	s.missing += uint64(len(missing))
	switch s.put(&h, payload, names, missing) {
	case dropped:
		s.dropped += uint64(len(missing))
		s.mu.Unlock()
		in.signal()
		return
	case repeated:
		s.mu.Unlock()
		in.arm()
		return
	}
	wake := !s.signaled && len(s.buf) >= cap(s.buf)/2
	s.signaled = s.signaled || wake
	s.mu.Unlock()
	if wake {
		in.signal()
	}
	in.arm()
}

// header is a record's fixed part.
type header struct {
	client                                [16]byte
	flags                                 byte
	names, found, missing, repeat, weight uint16
}

func (h *header) put(r []byte) {
	copy(r, h.client[:])
	r[offFlags] = h.flags
	binary.NativeEndian.PutUint16(r[offNames:], h.names)
	binary.NativeEndian.PutUint16(r[offFound:], h.found)
	binary.NativeEndian.PutUint16(r[offMiss:], h.missing)
	binary.NativeEndian.PutUint16(r[offRepeat:], h.repeat)
	binary.NativeEndian.PutUint16(r[offWeight:], h.weight)
}

// staged is a name as staged: at most maxName bytes.
func staged(n []byte) []byte { return n[:min(len(n), maxName)] }

// wireSpan is the stretch of payload from names[first]'s first byte to
// names[last]'s last (first and last: missing's ends), if the names are
// views into it as Decode leaves them: sliced at the offsets Decode noted
// (pva.SearchName.Off), taken only if both ends are the names' own bytes
// by address and the names in it, each after its CID and size, fill it
// exactly (a name built by hand has no such offset: nil, and the names
// are copied). On the way it writes each name's length in it, marked if
// unclaimed, to lens.
func wireSpan(payload []byte, names []pva.SearchName, missing []int, lens []byte) []byte {
	first, last := missing[0], missing[len(missing)-1]
	span := names[first : last+1]
	f, l := span[0].Name, span[len(span)-1].Name
	lo, hi := int(span[0].Off), int(span[len(span)-1].Off)+len(l)
	if len(f) == 0 || len(l) == 0 || lo < 0 || lo >= hi || hi > len(payload) || hi-lo > 0xffff ||
		&payload[lo] != &f[0] || &payload[hi-1] != &l[len(l)-1] {
		return nil
	}
	lens = lens[:2*len(span)]
	mark := uint16(0)
	if len(missing) == len(span) {
		mark = unclaimed // dense: every name in the stretch
	}
	if size, all := putLens(span, lens, mark); all >= unclaimed || size+4*(len(span)-1)-sizeLen(len(f)) != hi-lo {
		return nil
	}
	if mark == 0 {
		for _, m := range missing {
			j := lens[2*(m-first):]
			binary.NativeEndian.PutUint16(j, binary.NativeEndian.Uint16(j)|unclaimed)
		}
	}
	return payload[lo:hi]
}

// putLens writes each name's length, or'd with mark, to lens, and
// returns the bytes of the names and their sizes and their lengths or'd.
//
// It runs for every name of every search staged in full, repeats
// included: the loop only loads, adds and stores (no branch per name, the
// bounds checked once), and the sizes are counted after it, one byte each
// unless a name is 254 bytes or more (all tells: every length is at most
// their or), which only then takes a second pass.
func putLens(span []pva.SearchName, lens []byte, mark uint16) (size, all int) {
	lens = lens[:2*len(span)]
	for i := range span {
		n := len(span[i].Name)
		all |= n
		size += n
		binary.NativeEndian.PutUint16(lens[2*i:2*i+2], uint16(n)|mark)
	}
	if all < 254 {
		return size + len(span), all
	}
	for i := range span {
		size += sizeLen(len(span[i].Name))
	}
	return size, all
}

// sizeLen is the bytes of a PVA size n before its string.
func sizeLen(n int) int {
	if n < 254 {
		return 1
	}
	return 5
}

type putResult int

const (
	staged1 putResult = iota
	repeated
	dropped
)

// put appends h's record with those names, or counts it a repeat of the
// shard's last record (written after the buffer's end, all but a
// payload's stretch, and compared; a light record, its header alone, on
// the stack, so that a repeat needs no room); s.mu held.
func (s *stage) put(h *header, payload []byte, names []pva.SearchName, missing []int) putResult {
	if h.flags&flagLight == 0 && s.repeatsWire(h, payload, names, missing) {
		return repeated
	}
	if h.flags&flagLight != 0 && s.last >= 0 {
		// A light record is its header: compared from the stack, so a
		// repeat in a storm is counted even with the buffer full.
		var r [recHeader]byte
		h.put(r[:])
		if s.sameAsLast(r[:], nil) {
			s.bumpLast()
			return repeated
		}
	}
	start := len(s.buf)
	free := s.buf[start:cap(s.buf)]
	need, span := recHeader, []byte(nil)
	if h.flags&flagLight == 0 && len(missing) > 0 {
		need, span = s.putNames(h, free, payload, names, missing)
	}
	if need < 0 || need > len(free) {
		return dropped
	}
	r := free[:need]
	h.put(r)
	head := r[:need-len(span)]
	// A light record was compared above already.
	if h.flags&flagLight == 0 && s.last >= 0 && s.sameAsLast(head, span) {
		s.bumpLast()
		return repeated
	}
	copy(r[len(head):], span)
	s.buf, s.last = s.buf[:start+need], start
	s.staged += len(missing)
	if h.flags&flagLight == 0 {
		s.stagedFull += len(missing)
	}
	return staged1
}

// repeatsWire counts a full search whose names are all unclaimed and
// views into payload (the storm of retries the answer path sees most) a
// repeat of the shard's last record if it is one, reading that record
// instead of writing the search's own first: the header, each name's
// length and the payload's stretch compared where they lie. It proves
// what put's own compare does (the stretch's ends are the names' own
// bytes, and the lengths equal those that filled the last record's
// stretch of the same bytes, so they fill this one); s.mu held.
func (s *stage) repeatsWire(h *header, payload []byte, names []pva.SearchName, missing []int) bool {
	if s.last < 0 || len(missing) == 0 || len(payload) == 0 {
		return false
	}
	first, last := missing[0], missing[len(missing)-1]
	if last-first+1 != len(missing) {
		return false // not dense: put's compare decides
	}
	p := s.buf[s.last:]
	span := names[first : last+1]
	if len(p) < recHeader+4+2*len(span) || p[offFlags] != h.flags|flagWire ||
		binary.NativeEndian.Uint16(p[recHeader:]) != uint16(len(span)) {
		return false
	}
	f, l := span[0].Name, span[len(span)-1].Name
	lo, hi := int(span[0].Off), int(span[len(span)-1].Off)+len(l)
	if len(f) == 0 || len(l) == 0 || lo >= hi || hi > len(payload) || hi-lo > 0xffff ||
		&payload[lo] != &f[0] || &payload[hi-1] != &l[len(l)-1] {
		return false
	}
	data := p[recHeader+4+2*len(span):]
	if len(data) != hi-lo || int(binary.NativeEndian.Uint16(p[recHeader+2:])) != hi-lo ||
		binary.NativeEndian.Uint16(p[offRepeat:]) == 0xffff {
		return false
	}
	if string(data) != string(payload[lo:hi]) {
		return false // first: new names differ at once
	}
	var r [recHeader]byte
	h.flags |= flagWire
	h.put(r[:])
	h.flags &^= flagWire
	if string(p[:offRepeat]) != string(r[:offRepeat]) || string(p[offWeight:recHeader]) != string(r[offWeight:]) {
		return false
	}
	lens := p[recHeader+4 : recHeader+4+2*len(span)]
	for i := range span {
		if binary.NativeEndian.Uint16(lens[2*i:2*i+2]) != uint16(len(span[i].Name))|unclaimed {
			return false
		}
	}
	s.bumpLast()
	return true
}

// bumpLast counts one more repeat of the shard's last record; s.mu held.
func (s *stage) bumpLast() {
	p := s.buf[s.last:]
	binary.NativeEndian.PutUint16(p[offRepeat:], binary.NativeEndian.Uint16(p[offRepeat:])+1)
}

// putNames writes a full record's names into free, after the header's
// room, and returns the record's length (-1: it does not fit) and the
// payload's stretch still to copy at its end (nil: the names are
// written).
func (s *stage) putNames(h *header, free, payload []byte, names []pva.SearchName, missing []int) (int, []byte) {
	body := recHeader + 4
	if count := missing[len(missing)-1] - missing[0] + 1; len(payload) > 0 && body+2*count <= len(free) {
		if span := wireSpan(payload, names, missing, free[body:body+2*count]); span != nil {
			need := body + 2*count + len(span)
			if need > len(free) {
				return -1, nil
			}
			h.flags |= flagWire
			binary.NativeEndian.PutUint16(free[recHeader:], uint16(count))
			binary.NativeEndian.PutUint16(free[recHeader+2:], uint16(len(span)))
			return need, span
		}
	}
	m := len(missing)
	data := 0
	for _, i := range missing {
		data += len(staged(names[i].Name))
	}
	need := body + 2*m + data
	if need > len(free) || data > 0xffff || m > 0x7fff {
		return -1, nil
	}
	binary.NativeEndian.PutUint16(free[recHeader:], uint16(m))
	binary.NativeEndian.PutUint16(free[recHeader+2:], uint16(data))
	lens, out := free[body:body+2*m], free[body+2*m:]
	for k, i := range missing {
		n := copy(out, staged(names[i].Name))
		binary.NativeEndian.PutUint16(lens[2*k:], uint16(n)|unclaimed)
		out = out[n:]
	}
	return need, nil
}

// sameAsLast is whether the record r then tail is the shard's last
// record again, its repeats aside; s.mu held.
func (s *stage) sameAsLast(r, tail []byte) bool {
	p := s.buf[s.last:]
	return len(p) == len(r)+len(tail) && binary.NativeEndian.Uint16(p[offRepeat:]) < 0xffff &&
		string(p[:offRepeat]) == string(r[:offRepeat]) && string(p[offWeight:len(r)]) == string(r[offWeight:]) &&
		string(p[len(r):]) == string(tail)
}

// maxName bounds a staged name; PVA names are far shorter, and the record
// layout holds lengths in 16 bits.
const maxName = 1024

func clamp16(n int) uint16 { return uint16(min(n, 0xffff)) }

func (in *Insight) signal() {
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// record is one decoded staging record; names are views into the buffer.
type record struct {
	client   netip.Addr
	tcp      bool
	names    int
	found    int
	nMissing int
	times    int // the search and its repeats
	missing  [][]byte
}

// digest folds one staging buffer into the summaries. Searches of the same
// name by the same client within one buffer (a client retrying, a storm)
// are summed first and applied once, with their weight: most of a storm
// costs one hash and one probe per name.
func (in *Insight) digest(b []byte, now int64, p float64) {
	r := &in.rec
	var prevClient netip.Addr
	var prevBody, prevHead []byte
	prevTaken := false
	in.prevAgg = in.prevAgg[:0]
	for len(b) >= recHeader {
		n := recordLen(b)
		rec := b[:n]
		b = b[n:]
		r.client = netip.AddrFrom16([16]byte(rec[:16])).Unmap()
		fl := rec[offFlags]
		r.tcp = fl&flagTCP != 0
		r.names = int(binary.NativeEndian.Uint16(rec[offNames:]))
		r.found = int(binary.NativeEndian.Uint16(rec[offFound:]))
		m := int(binary.NativeEndian.Uint16(rec[offMiss:]))
		r.nMissing = m
		r.times = 1 + int(binary.NativeEndian.Uint16(rec[offRepeat:]))
		sw := uint64(binary.NativeEndian.Uint16(rec[offWeight:])) // the answer path's weight
		for i := range in.win {
			w := &in.win[i]
			w.clients[w.cur].add(r, now)
		}
		if fl&flagLight != 0 { // sampled out on the answer path
			in.samp.out += uint64(m * r.times)
			prevClient = netip.Addr{}
			continue
		}
		// A client repeating its last search (a retry, a storm): the same
		// names again, without decoding or hashing them.
		body := rec[recHeader:]
		if r.client == prevClient && string(body) == string(prevBody) && string(rec[offFlags:offRepeat]) == string(prevHead[:offRepeat-offFlags]) &&
			string(rec[offWeight:recHeader]) == string(prevHead[offWeight-offFlags:]) {
			if !prevTaken {
				in.samp.out += uint64(m * r.times)
				continue
			}
			w := sw * in.samp.weight(r.times, p)
			for _, j := range in.prevAgg {
				in.aggs[j].n += w
			}
			continue
		}
		prevClient, prevBody, prevHead = r.client, body, rec[offFlags:recHeader]
		in.prevAgg = in.prevAgg[:0]
		if prevTaken = m == 0 || in.samp.take(p); !prevTaken {
			in.samp.out += uint64(m * r.times)
			continue
		}
		weight := sw * in.samp.weight(r.times, p)
		r.missing = readNames(body, fl&flagWire != 0, r.missing[:0])
		ch := maphash.Comparable(in.seed, r.client)
		for _, n := range r.missing {
			nh := maphash.Bytes(in.seed, n)
			k := nh ^ ch*0x9e3779b97f4a7c15
			j, ok := in.aggIdx[k]
			if !ok {
				j = int32(len(in.aggs))
				in.aggIdx[k] = j
				in.aggs = append(in.aggs, agg{name: n, nh: nh, client: r.client, ch: ch})
			} else if a := &in.aggs[j]; a.client != r.client || string(a.name) != string(n) {
				// A hash collision: its own entry, not found again by hash.
				j = int32(len(in.aggs))
				in.aggs = append(in.aggs, agg{name: n, nh: nh, client: r.client, ch: ch})
			}
			in.aggs[j].n += weight
			in.prevAgg = append(in.prevAgg, j)
		}
	}
	for i := range in.aggs {
		a := &in.aggs[i]
		in.applyName(a.name, a.nh, a.client, a.ch, a.n, now)
	}
	clear(in.aggIdx)
	clear(in.aggs) // drop the views into the buffer
	in.aggs = in.aggs[:0]
}

// recordLen is the length of the staging record at the start of b.
func recordLen(b []byte) int {
	if b[offFlags]&flagLight != 0 {
		return recHeader
	}
	count := int(binary.NativeEndian.Uint16(b[recHeader:]))
	return recHeader + 4 + 2*count + int(binary.NativeEndian.Uint16(b[recHeader+2:]))
}

// readNames appends a full record's unclaimed names (body: what follows
// its header), each up to maxName bytes: from a payload's stretch (wire),
// each name after its CID and size, or one after another.
func readNames(body []byte, wire bool, out [][]byte) [][]byte {
	count := int(binary.NativeEndian.Uint16(body))
	lens, data := body[4:4+2*count], body[4+2*count:]
	off := 0
	for k := range count {
		v := binary.NativeEndian.Uint16(lens[2*k:])
		l := int(v &^ unclaimed)
		if wire && k > 0 {
			off += 4 + sizeLen(l)
		}
		if v&unclaimed != 0 {
			out = append(out, staged(data[off:off+l]))
		}
		off += l
	}
	return out
}

// agg is one (name, client) pair's searches within a staging buffer.
type agg struct {
	name   []byte
	nh     uint64 // the name's hash
	client netip.Addr
	ch     uint64 // the client's hash
	n      uint64
}

func (in *Insight) applyName(name []byte, nh uint64, client netip.Addr, ch, n uint64, now int64) {
	for i := range in.win {
		w := &in.win[i]
		w.names[w.cur].add(name, nh, client, ch, n, now)
	}
}
