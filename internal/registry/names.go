// NamesContext, the operator API's name listing: the one reader that walks
// the whole index, so it does so in chunks and stalls neither searches nor
// the writer.

package registry

import (
	"context"
	"slices"
	"strings"

	"github.com/pvans-project/pvans/internal/glob"
)

// namesScanChunk is the index slots copied per hold of imu (read): a writer
// waiting for imu — and the searches queued behind it — waits microseconds,
// however large the registry.
const namesScanChunk = 4096

// namesDetailChunk is the names whose details are read per hold of wmu.
const namesDetailChunk = 256

// NamesContext lists held names matching pattern, sorted, at most limit (0:
// no limit). A pattern with '*' or '?' is a glob ('*' any run, '?' one
// character, internal/glob); otherwise it is a prefix ("" lists all).
//
// It never holds a registry lock for more than one short chunk (the index is copied namesScanChunk
// slots at a time under the read lock and matched outside any lock; the
// details are read namesDetailChunk names at a time), so a listing of a
// million names delays no search answer and no writer. It keeps at most
// about 2×limit matches in memory, and gives up with ctx's error when ctx
// ends (a costly glob is bounded by the caller's deadline).
//
// Taken while servers change, the listing is weakly consistent: a name
// added or removed meanwhile may be missing or present, as if listed a
// moment earlier or later; it is never listed twice.
func (r *Registry) NamesContext(ctx context.Context, pattern string, limit int) ([]NameInfo, error) {
	isGlob := glob.Has(pattern)
	match := func(n string) bool {
		if isGlob {
			return glob.Match(pattern, n)
		}
		return strings.HasPrefix(n, pattern)
	}
	keep := func(found []string) []string {
		slices.Sort(found)
		found = slices.Compact(found)
		if limit > 0 && len(found) > limit {
			found = found[:limit]
		}
		return found
	}
	buf := make([]string, namesScanChunk)
	var found []string
	var table *uint32 // the index's slices; a rebuild swaps them
	for pos := 0; ; pos += namesScanChunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.imu.RLock()
		tags, ents := r.idx.tags, r.idx.ents
		if t := &tags[0]; t != table {
			if table != nil {
				// Rebuilt since the last chunk: slots moved, so scan the new
				// table from the start (matches found so far are kept; the
				// final sort removes repeats).
				pos = 0
			}
			table = t
		}
		if pos >= len(tags) {
			r.imu.RUnlock()
			break
		}
		k := 0
		for i, end := pos, min(pos+namesScanChunk, len(tags)); i < end; i++ {
			if tags[i] != 0 {
				buf[k] = ents[i].name
				k++
			}
		}
		r.imu.RUnlock()
		for _, n := range buf[:k] {
			if match(n) {
				found = append(found, n)
			}
		}
		if limit > 0 && len(found) >= 2*limit+namesScanChunk {
			found = keep(found)
		}
	}
	found = keep(found)
	out := make([]NameInfo, 0, len(found))
	for i := 0; i < len(found); i += namesDetailChunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.wmu.Lock()
		txn := r.db.Txn(false) // as of the last commit: wmu keeps it the latest
		var row *serverRow
		for _, n := range found[i:min(i+namesDetailChunk, len(found))] {
			slot, dups, ok := r.idx.holder(n)
			if !ok {
				continue // released since the scan
			}
			if row == nil || row.Slot != slot {
				row = serverBy(txn, "slot", slot)
			}
			ni := NameInfo{Name: n, GUID: row.GUID, Addr: row.Info.Addr, TLS: row.Info.TLS, How: row.Info.ListedHow,
				At: row.Info.ListedAt, Claimant: int(dups)}
			if l, ok := row.srv.extra[n]; ok {
				ni.How, ni.At = l.how, l.at
			}
			out = append(out, ni)
		}
		r.wmu.Unlock()
	}
	return out, nil
}
