// Lookups: the read side every search answer comes from (imu read-locked,
// no allocation), and the record.FIELD rule it applies (see the package
// doc, "Field names").

package registry

import (
	"bytes"

	"github.com/pvans-project/pvans/internal/pva"
)

// RecordOf returns the record part of a record.FIELD name when the field
// rule is on; ok is false for other names or when the rule is off.
func (r *Registry) RecordOf(name []byte) (rec []byte, ok bool) {
	if !r.fieldNames.Load() {
		return nil, false
	}
	return recordPart(name)
}

// recordPart splits record.FIELD[$][{filter}] at the first '.'; EPICS record
// names cannot contain '.', but channel filters (JSON) can.
func recordPart(name []byte) ([]byte, bool) {
	return recordPartAt(name, bytes.IndexByte(name, '.'))
}

// recordPartAt is recordPart for a name whose first '.' is at dot (-1: none).
func recordPartAt(name []byte, dot int) ([]byte, bool) {
	if dot <= 0 || bytes.IndexByte(name[:dot], '{') >= 0 {
		return nil, false
	}
	f := name[dot+1:]
	n := 0
	for n < len(f) && (f[n] >= 'A' && f[n] <= 'Z' || f[n] >= '0' && f[n] <= '9' || f[n] == '_') {
		n++
	}
	if n == 0 {
		return nil, false
	}
	if n < len(f) && f[n] == '$' {
		n++
	}
	if n < len(f) && f[n] != '{' {
		return nil, false
	}
	return name[:dot], true
}

// lookupLocked answers one name from the index; imu (read) or wmu held.
func (r *Registry) lookupLocked(name []byte) *Holder {
	if h := r.lookupHashed(r.idx.hashBytes(name), name); h != nil {
		return h
	}
	if r.fieldNames.Load() {
		if rec, ok := recordPart(name); ok {
			return r.lookupHashed(r.idx.hashBytes(rec), rec)
		}
	}
	return nil
}

// LookupBatch answers every name of q in one read: out[i] is the holder of
// q[i].Name or nil. out must be at least len(q) long. It does not allocate.
func (r *Registry) LookupBatch(q []pva.SearchName, out []*Holder) {
	out = out[:len(q)]
	var names [lookupChunk][]byte
	r.imu.RLock()
	for len(q) > 0 {
		k := min(len(q), lookupChunk)
		for i := range k {
			names[i] = q[i].Name
		}
		r.lookupMany(&names, k, out, r.fieldNames.Load())
		q, out = q[k:], out[k:]
	}
	r.imu.RUnlock()
}

// Current reports whether h is still its server's holder: the server is
// registered, with the endpoints h names (Holders are immutable, and
// replaced when those change). It does not allocate; false says only
// that h is no longer current (ask Server).
func (r *Registry) Current(h *Holder) bool {
	r.imu.RLock()
	defer r.imu.RUnlock()
	return int(h.ID) < len(r.holders) && r.holders[h.ID] == h
}

// Lookup answers one name given as bytes; it does not allocate.
func (r *Registry) Lookup(name []byte) *Holder {
	r.imu.RLock()
	h := r.lookupLocked(name)
	r.imu.RUnlock()
	return h
}

// LookupName answers one name.
func (r *Registry) LookupName(name string) (*Holder, bool) {
	r.imu.RLock()
	h := r.lookupLocked([]byte(name))
	r.imu.RUnlock()
	return h, h != nil
}
