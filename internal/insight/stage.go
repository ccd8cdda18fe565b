package insight

import (
	"encoding/binary"
	"hash/maphash"
	"math/rand/v2"
	"net/netip"
	"sync"
	"unsafe"

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
//	packed: u16 first name's length | u16 count | u16 span length |
//	        bitmap of count bits (absent when dense) | span
//	copied: u16 span length | span | missing × u16 length
//	light:  nothing more
//
// Beyond the digest's budget (see sampler) the answer path itself samples:
// a search with unclaimed names is staged in full with probability p (the
// rate the last digest published) and then carries weight ≈ 1/p; otherwise
// it is staged "light", its counts without its names, for the client
// summaries, which stay exact. In a storm the answer path then copies a
// header instead of the names.
//
// packed is the answer path's case: the names are views into the search
// payload, so the stretch of it from the first unclaimed name to the end
// of the last is copied in one go, with a bitmap of which of the count
// names in it are unclaimed (none when all are: "dense", the storm case,
// costing nothing per name). The digest walks the span as the wire has it
// (CID, size, name). Names that are not views into the payload are copied
// one by one instead. A dense search identical to the shard's previous
// record from the same client (a retry, a storm) only bumps that record's
// repeats: a compare instead of a copy, and nothing new for the digest.
const (
	recHeader   = 16 + 1 + 2 + 2 + 2 + 2 + 2
	flagTCP     = 1
	flagPacked  = 2
	flagDense   = 4
	flagLight   = 8
	packedExtra = 6
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
// (resolver.Batch.Missing) and how many were answered found. Nothing is
// kept. It is safe for concurrent use and never blocks on the digest.
func (in *Insight) Searched(client netip.Addr, tcp bool, payload []byte, names []pva.SearchName, missing []int, found int) {
	if in == nil {
		return
	}
	a := client.As16()
	s := &in.stages[int(a[15])%shards]
	m := len(missing)
	w, light := uint16(1), false
	if m > 0 {
		if p := in.stageRate(); p < 1 {
			if rand.Float64() >= p {
				light = true
			} else {
				w = stageWeight(p, rand.Float64())
			}
		}
	}
	lo, hi, first, count, dense := -1, 0, 0, 0, false
	if m > 0 && len(payload) > 0 && !light {
		first, count = missing[0], missing[m-1]-missing[0]+1
		f, l := names[first].Name, names[missing[m-1]].Name
		base := uintptr(unsafe.Pointer(unsafe.SliceData(payload)))
		lo = int(uintptr(unsafe.Pointer(unsafe.SliceData(f))) - base)
		e := int(uintptr(unsafe.Pointer(unsafe.SliceData(l))) - base)
		hi = e + len(l)
		// Safe pointer comparisons prove both ends are views into payload.
		if len(f) == 0 || len(l) == 0 || lo < 0 || e < lo || hi > len(payload) || hi-lo > 0xffff ||
			count <= 0 || count > 0xffff || len(f) > 0xffff || &payload[lo] != &f[0] || &payload[e] != &l[0] {
			lo = -1
		}
		dense = count == m
	}
	var need int
	switch {
	case light:
		need = recHeader
	case lo >= 0:
		need = recHeader + packedExtra + (hi - lo)
		if !dense {
			need += (count + 7) / 8
		}
	default:
		need = recHeader + 2 + 2*m
		for _, i := range missing {
			need += min(len(names[i].Name), maxName)
		}
	}
	fl := byte(0)
	if tcp {
		fl |= flagTCP
	}
	if light {
		fl |= flagLight
	} else if lo >= 0 {
		fl |= flagPacked
		if dense {
			fl |= flagDense
		}
	}
	s.mu.Lock()
	s.found += uint64(found)
	s.missing += uint64(m)
	if (light || lo >= 0 && dense) && s.last >= 0 {
		if p := s.buf[s.last:]; p[16] == fl && [16]byte(p[:16]) == a &&
			binary.NativeEndian.Uint16(p[17:]) == clamp16(len(names)) &&
			binary.NativeEndian.Uint16(p[19:]) == clamp16(found) &&
			binary.NativeEndian.Uint16(p[21:]) == uint16(m) &&
			binary.NativeEndian.Uint16(p[23:]) < 0xffff &&
			binary.NativeEndian.Uint16(p[25:]) == w &&
			(light || binary.NativeEndian.Uint16(p[recHeader:]) == uint16(len(names[first].Name)) &&
				binary.NativeEndian.Uint16(p[recHeader+2:]) == uint16(count) &&
				int(binary.NativeEndian.Uint16(p[recHeader+4:])) == hi-lo &&
				string(p[recHeader+packedExtra:recHeader+packedExtra+hi-lo]) == string(payload[lo:hi])) {
			binary.NativeEndian.PutUint16(p[23:], binary.NativeEndian.Uint16(p[23:])+1)
			s.mu.Unlock()
			in.arm()
			return
		}
	}
	if len(s.buf)+need > cap(s.buf) || need > 0xffff+recHeader+packedExtra+0x2000 {
		s.dropped += uint64(m)
		s.mu.Unlock()
		in.signal()
		return
	}
	start := len(s.buf)
	s.last = start
	b := s.buf[:start+need]
	r := b[start:]
	copy(r, a[:])
	binary.NativeEndian.PutUint16(r[17:], clamp16(len(names)))
	binary.NativeEndian.PutUint16(r[19:], clamp16(found))
	binary.NativeEndian.PutUint16(r[21:], uint16(m))
	binary.NativeEndian.PutUint16(r[23:], 0)
	binary.NativeEndian.PutUint16(r[25:], w)
	r = r[recHeader:]
	switch {
	case light:
	case lo >= 0:
		binary.NativeEndian.PutUint16(r, uint16(len(names[first].Name)))
		binary.NativeEndian.PutUint16(r[2:], uint16(count))
		binary.NativeEndian.PutUint16(r[4:], uint16(hi-lo))
		r = r[packedExtra:]
		if !dense {
			bm := r[:(count+7)/8]
			clear(bm)
			for _, i := range missing {
				if k := i - first; k >= 0 && k < count {
					bm[k>>3] |= 1 << (k & 7)
				}
			}
			r = r[len(bm):]
		}
		copy(r, payload[lo:hi])
	default:
		span := 0
		body := r[2:]
		for _, i := range missing {
			span += copy(body[span:], names[i].Name[:min(len(names[i].Name), maxName)])
		}
		binary.NativeEndian.PutUint16(r, uint16(span))
		lens := body[span:]
		for k, i := range missing {
			binary.NativeEndian.PutUint16(lens[2*k:], uint16(min(len(names[i].Name), maxName)))
		}
	}
	b[start+16] = fl
	s.staged += m
	if !light {
		s.stagedFull += m
	}
	s.buf = b
	wake := !s.signaled && len(b) >= cap(b)/2
	if wake {
		s.signaled = true
	}
	s.mu.Unlock()
	if wake {
		in.signal()
	}
	in.arm()
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
		fl := rec[16]
		r.tcp = fl&flagTCP != 0
		r.names = int(binary.NativeEndian.Uint16(rec[17:]))
		r.found = int(binary.NativeEndian.Uint16(rec[19:]))
		m := int(binary.NativeEndian.Uint16(rec[21:]))
		r.nMissing = m
		r.times = 1 + int(binary.NativeEndian.Uint16(rec[23:]))
		sw := uint64(binary.NativeEndian.Uint16(rec[25:])) // the answer path's weight
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
		if r.client == prevClient && string(body) == string(prevBody) && string(rec[16:23]) == string(prevHead[:7]) &&
			string(rec[25:27]) == string(prevHead[9:]) {
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
		prevClient, prevBody, prevHead = r.client, body, rec[16:recHeader]
		in.prevAgg = in.prevAgg[:0]
		if prevTaken = m == 0 || in.samp.take(p); !prevTaken {
			in.samp.out += uint64(m * r.times)
			continue
		}
		weight := sw * in.samp.weight(r.times, p)
		rec = rec[recHeader:]
		r.missing = r.missing[:0]
		if fl&flagPacked != 0 {
			firstLen := int(binary.NativeEndian.Uint16(rec))
			count := int(binary.NativeEndian.Uint16(rec[2:]))
			rec = rec[packedExtra:]
			var bm []byte
			if fl&flagDense == 0 {
				bm, rec = rec[:(count+7)/8], rec[(count+7)/8:]
			}
			r.missing = walkSpan(rec, firstLen, count, bm, r.missing)
			if len(r.missing) != m {
				in.malformed++ // a span that does not parse as the wire has it
				r.missing = r.missing[:0]
			}
		} else {
			span := int(binary.NativeEndian.Uint16(rec))
			names, lens := rec[2:2+span], rec[2+span:2+span+2*m]
			off := 0
			for k := range m {
				l := int(binary.NativeEndian.Uint16(lens[2*k:]))
				r.missing = append(r.missing, names[off:off+l])
				off += l
			}
		}
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
	m := int(binary.NativeEndian.Uint16(b[21:]))
	if b[16]&flagLight != 0 {
		return recHeader
	}
	if b[16]&flagPacked != 0 {
		count := int(binary.NativeEndian.Uint16(b[recHeader+2:]))
		n := recHeader + packedExtra + int(binary.NativeEndian.Uint16(b[recHeader+4:]))
		if b[16]&flagDense == 0 {
			n += (count + 7) / 8
		}
		return n
	}
	return recHeader + 2 + int(binary.NativeEndian.Uint16(b[recHeader:])) + 2*m
}

// walkSpan reads the names of a packed span: the first name's bytes, then
// count-1 more (CID, size, name) entries as the wire has them, keeping
// those whose bit is set (all when bm is nil). It returns nothing if the
// span does not parse to its exact end in either byte order (only a size
// of 254 bytes or more depends on it).
func walkSpan(span []byte, firstLen, count int, bm []byte, out [][]byte) [][]byte {
	for _, be := range []bool{true, false} {
		out = out[:0]
		if firstLen > len(span) {
			return out
		}
		if bm == nil || bm[0]&1 != 0 {
			out = append(out, span[:firstLen])
		}
		rd := pva.NewReader(span[firstLen:], be, "insight span")
		for k := 1; k < count && !rd.Failed(); k++ {
			rd.U32("cid")
			n := rd.StringBytes("name")
			if bm == nil || bm[k>>3]&(1<<(k&7)) != 0 {
				out = append(out, n[:min(len(n), maxName)])
			}
		}
		if !rd.Failed() && rd.Remaining() == 0 {
			return out
		}
	}
	return out[:0]
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
