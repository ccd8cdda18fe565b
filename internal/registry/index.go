package registry

import (
	"bytes"
	"hash/maphash"
	"strings"
)

// nameIndex maps a held name to its holder's server slot and the number of
// other servers also claiming it. It is an open-addressing hash table with
// linear probing in flat slices; see the package doc ("The name index") for
// why it beats a Go map here.
//
// Slot i is tags[i] (4 bytes) and ents[i] (24 bytes: the name's string
// header, which shares the bytes of the holder's name set — the index never
// copies a name — the server slot, and the claimant count in what would
// otherwise be padding). The tag is the top 32 bits of the
// name's 64-bit hash, 0 meaning empty (a hash whose top bits are 0 gets tag
// 1, which has the same home). The home slot is the tag's top log2(len)
// bits, so:
//
//   - a miss reads only tags, a quarter of the table's bytes (8 MiB at 1M
//     names), and usually ends at an empty tag without any string compare;
//   - a hit reads the tag, then one entry and the name's bytes;
//   - a rebuild re-places every entry from its tag alone, without reading or
//     rehashing names.
//
// Deletion shifts later entries of the cluster back (no tombstones), so
// probe lengths stay those of the current load.
//
// Reads need imu (read) or wmu; writes need wmu and imu. Growth and
// shrinking build the new slices while holding only wmu — readers keep
// probing the old ones, which no one else can change — and swap them in
// under imu, so readers never wait for a rebuild.
type nameIndex struct {
	seed  maphash.Seed
	tags  []uint32
	ents  []entry
	shift uint // 32 - log2(len(tags))
	mask  uint32
	count int
	// dupNames counts the names with claimants, dupClaims the claimants.
	dupNames, dupClaims int
	// dotted counts the held names that contain a '.', by a key of their
	// length and the bytes after the first '.' (dottedKey): a counting
	// filter small enough to stay in cache. A query record.FIELD whose key's
	// counter is 0 cannot be held as it is, so the field rule goes straight
	// to its record: one hash and one probe of the big table instead of two
	// of each. Real sites hold record names, which have no '.'.
	dotted []uint32
}

// dottedBits sizes nameIndex.dotted (2^14 counters, 64 KiB): a false
// "maybe" costs only the hash and probe the filter would have saved.
const dottedBits = 14

type entry struct {
	name string
	srv  uint32
	// dups is the number of duplicate claims on name (rows of
	// "conflicts"): the writer reads it instead of memdb to know whether a
	// name has claimants, and lookups never read it.
	dups uint32
}

const (
	minIndexBits = 6
	maxIndexBits = 31 // the tag must hold the home slot's bits
)

func newNameIndex() nameIndex {
	t := nameIndex{seed: maphash.MakeSeed(), dotted: make([]uint32, 1<<dottedBits)}
	t.tags, t.ents, t.shift, t.mask = makeSlots(0)
	return t
}

// makeSlots returns empty slices of the smallest power-of-two length at
// least n.
func makeSlots(n int) ([]uint32, []entry, uint, uint32) {
	bits := uint(minIndexBits)
	for 1<<bits < n && bits < maxIndexBits {
		bits++
	}
	return make([]uint32, 1<<bits), make([]entry, 1<<bits), 32 - bits, 1<<bits - 1
}

func (t *nameIndex) hashBytes(b []byte) uint32  { return tagOf(maphash.Bytes(t.seed, b)) }
func (t *nameIndex) hashString(s string) uint32 { return tagOf(maphash.String(t.seed, s)) }

func tagOf(h uint64) uint32 { return max(uint32(h>>32), 1) }

// dottedKey is name's bucket in nameIndex.dotted; dot is the index of its
// first '.'. It reads only what follows the dot (a field name: a few bytes),
// so a query pays it instead of a second hash of the whole name.
func dottedKey[T ~string | ~[]byte](name T, dot int) uint32 {
	h := uint32(len(name)) * 0x9e3779b1
	for i := dot + 1; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * 0x01000193
	}
	return h >> (32 - dottedBits)
}

// mayHoldDotted reports whether a held name may be name, whose first '.' is
// at dot.
func (t *nameIndex) mayHoldDotted(name []byte, dot int) bool {
	return t.dotted[dottedKey(name, dot)] != 0
}

func (t *nameIndex) countDotted(name string, d int32) {
	if dot := strings.IndexByte(name, '.'); dot >= 0 {
		t.dotted[dottedKey(name, dot)] += uint32(d)
	}
}

// findBytes returns the slot of name (with tag), or -1.
func (t *nameIndex) findBytes(tag uint32, name []byte) int {
	i := tag >> t.shift
	for {
		g := t.tags[i]
		if g == 0 {
			return -1
		}
		if g == tag && t.ents[i].name == string(name) {
			return int(i)
		}
		i = (i + 1) & t.mask
	}
}

// find returns the slot of name, or -1.
func (t *nameIndex) find(name string) int {
	tag := t.hashString(name)
	i := tag >> t.shift
	for {
		g := t.tags[i]
		if g == 0 {
			return -1
		}
		if g == tag && t.ents[i].name == name {
			return int(i)
		}
		i = (i + 1) & t.mask
	}
}

// get returns name's server slot.
func (t *nameIndex) get(name string) (uint32, bool) {
	if i := t.find(name); i >= 0 {
		return t.ents[i].srv, true
	}
	return 0, false
}

// holder returns name's server slot and its number of duplicate claims.
func (t *nameIndex) holder(name string) (srv, dups uint32, ok bool) {
	if i := t.find(name); i >= 0 {
		return t.ents[i].srv, t.ents[i].dups, true
	}
	return 0, 0, false
}

// addDups changes the duplicate claims on held name by d.
func (t *nameIndex) addDups(name string, d int) {
	i := t.find(name)
	if i < 0 {
		panic("registry: duplicate claim on a name nobody holds")
	}
	e := &t.ents[i]
	if e.dups == 0 {
		t.dupNames++
	}
	e.dups = uint32(int(e.dups) + d)
	if e.dups == 0 {
		t.dupNames--
	}
	t.dupClaims += d
}

// set makes srv the holder of name, storing this name string (so that the
// previous holder's copy can be collected); its duplicate claims stay.
func (t *nameIndex) set(name string, srv uint32) {
	tag := t.hashString(name)
	i := tag >> t.shift
	for {
		g := t.tags[i]
		if g == 0 {
			break
		}
		if g == tag && t.ents[i].name == name {
			t.ents[i].name, t.ents[i].srv = name, srv
			return
		}
		i = (i + 1) & t.mask
	}
	if t.overloaded(t.count + 1) {
		// reserveIndex should have made room before imu was taken;
		// rebuilding here is correct, only slower for waiting readers.
		t.tags, t.ents, t.shift, t.mask = t.rebuilt(t.count + 1)
		t.set(name, srv)
		return
	}
	t.tags[i], t.ents[i] = tag, entry{name: name, srv: srv}
	t.count++
	t.countDotted(name, 1)
}

// delete removes name if present.
func (t *nameIndex) delete(name string) {
	if i := t.find(name); i >= 0 {
		t.deleteAt(uint32(i))
	}
}

// deleteAt empties slot i and shifts back the entries after it in its
// cluster that may move (Knuth's algorithm R): an entry at j with home slot
// k moves to the hole i unless k lies cyclically in (i, j].
func (t *nameIndex) deleteAt(i uint32) {
	tags, ents, mask, shift := t.tags, t.ents, t.mask, t.shift
	t.countDotted(ents[i].name, -1)
	if d := ents[i].dups; d > 0 {
		t.dupNames--
		t.dupClaims -= int(d)
	}
	j := i
	for {
		j = (j + 1) & mask
		g := tags[j]
		if g == 0 {
			break
		}
		k := g >> shift
		if i <= j && (k <= i || k > j) || i > j && k <= i && k > j {
			tags[i], ents[i] = g, ents[j]
			i = j
		}
	}
	tags[i], ents[i] = 0, entry{}
	t.count--
}

// overloaded reports whether n entries exceed the maximum load of 3/4.
func (t *nameIndex) overloaded(n int) bool {
	return n > len(t.tags)/4*3 && len(t.tags) < 1<<maxIndexBits
}

// underloaded reports whether the table is worth shrinking: under 1/8 full.
func (t *nameIndex) underloaded() bool {
	return len(t.tags) > 1<<minIndexBits && t.count < len(t.tags)/8
}

// rebuilt returns slices sized for n entries (load at most 1/2) holding the
// current entries, placed from their tags. It only reads t.
func (t *nameIndex) rebuilt(n int) ([]uint32, []entry, uint, uint32) {
	tags, ents, shift, mask := makeSlots(2 * n)
	for j, g := range t.tags {
		if g == 0 {
			continue
		}
		i := g >> shift
		for tags[i] != 0 {
			i = (i + 1) & mask
		}
		tags[i], ents[i] = g, t.ents[j]
	}
	return tags, ents, shift, mask
}

// reserveIndex makes room for n more held names before the caller takes
// imu, so a rebuild happens while readers still use the old table. wmu
// held, imu not.
func (r *Registry) reserveIndex(n int) {
	if !r.idx.overloaded(r.idx.count + n) {
		return
	}
	tags, ents, shift, mask := r.idx.rebuilt(r.idx.count + n)
	r.imu.Lock()
	r.idx.tags, r.idx.ents, r.idx.shift, r.idx.mask = tags, ents, shift, mask
	r.imu.Unlock()
}

// shrinkIndex gives memory back after large removals; wmu held, imu not.
func (r *Registry) shrinkIndex() {
	if !r.idx.underloaded() {
		return
	}
	tags, ents, shift, mask := r.idx.rebuilt(r.idx.count)
	r.imu.Lock()
	r.idx.tags, r.idx.ents, r.idx.shift, r.idx.mask = tags, ents, shift, mask
	r.imu.Unlock()
}

// lookupChunk is the most names answered per pass of lookupMany; the
// per-pass scratch arrays live on the stack.
const lookupChunk = 64

// lookupMany answers names[:k] into out; imu (read) held. It works in
// passes so that the cache misses of different names overlap instead of
// queueing one after another: the first pass hashes every name (no loads
// of the table), the second loads every name's home slot in a loop of
// nothing else, so that all of them are in flight at once (with the hashing
// interleaved, the CPU's window held only one or two), the third probes
// from those now-cached slots and loads each candidate's entry, the fourth
// loads the first byte of its name, the fifth compares names that are by
// then in cache. With field set, a record.FIELD that the dotted filter says
// no held name can be is replaced by its record in the first pass (names
// is scratch the callers own), so such a miss costs one hash and one probe,
// not two; the records of the other record.FIELD names that missed are then
// looked up the same way.
func (r *Registry) lookupMany(names *[lookupChunk][]byte, k int, out []*Holder, field bool) {
	t := &r.idx
	var recs [lookupChunk][]byte
	var at [lookupChunk]uint8
	nrec := 0
	tags, ents, shift, mask := t.tags, t.ents, t.shift, t.mask
	var hs, gs [lookupChunk]uint32
	var cand [lookupChunk]int32
	var first [lookupChunk]byte
	var lens [lookupChunk]int
	var isRecord [lookupChunk]bool
	k = min(k, lookupChunk, len(out))
	for i := 0; i < k; i++ {
		if field {
			n := names[i]
			if dot := bytes.IndexByte(n, '.'); dot >= 0 && !t.mayHoldDotted(n, dot) {
				if rec, ok := recordPartAt(n, dot); ok {
					names[i], isRecord[i] = rec, true
				}
			}
		}
		hs[i] = t.hashBytes(names[i])
	}
	for i := 0; i < k; i++ {
		gs[i] = tags[hs[i]>>shift]
	}
	for i := 0; i < k; i++ {
		h, g, j := hs[i], gs[i], hs[i]>>shift
		for g != 0 && g != h {
			j = (j + 1) & mask
			g = tags[j]
		}
		if g == 0 {
			cand[i] = -1
			continue
		}
		cand[i] = int32(j)
		lens[i] = len(ents[j].name)
	}
	for i := 0; i < k; i++ {
		if c := cand[i]; c >= 0 && lens[i] > 0 {
			first[i] = ents[c].name[0]
		}
	}
	for i := 0; i < k; i++ {
		n := names[i]
		if c := cand[i]; c >= 0 {
			e := &ents[c]
			if len(n) == lens[i] && len(n) > 0 && first[i] == n[0] && e.name == string(n) {
				out[i] = r.holders[e.srv]
				continue
			}
			// A tag collision: probe the rest of the cluster.
			if out[i] = r.lookupHashed(hs[i], n); out[i] != nil || !field {
				continue
			}
		} else {
			out[i] = nil
		}
		if field && !isRecord[i] {
			if rec, ok := recordPart(n); ok {
				recs[nrec], at[nrec] = rec, uint8(i)
				nrec++
			}
		}
	}
	if nrec > 0 {
		// The field rule's second probes, batched the same way.
		var hs [lookupChunk]*Holder
		r.lookupMany(&recs, nrec, hs[:], false)
		for i := range nrec {
			out[at[i]] = hs[i]
		}
	}
}

func (r *Registry) lookupHashed(tag uint32, name []byte) *Holder {
	if i := r.idx.findBytes(tag, name); i >= 0 {
		return r.holders[r.idx.ents[i].srv]
	}
	return nil
}
