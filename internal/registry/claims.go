// Claims: how a server's name set changes (ReplaceNames, AddNames), what
// one claim or release does to the name index, and duplicate claims with
// their takeovers (see the package doc, "Duplicate claims").

package registry

import (
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/pva"
)

// ReplaceNames replaces the whole set of names g claims (a probe result) in
// one transaction: readers see the old set or the new one, never a mix.
// Names held before and listed again keep answering without a gap. At
// MaxNames the names that do not fit are dropped (counted) and ErrNameLimit
// is returned with the rest applied.
func (r *Registry) ReplaceNames(g pva.GUID, names []string, how Source) error {
	var added []string
	w, s, end := r.beginOn(g, &added)
	defer end()
	if s == nil {
		return ErrUnknownServer
	}
	added, err := r.replaceLocked(w, s, names, how, r.clk.Now())
	r.commit(w)
	r.shrinkIndex()
	return err
}

// replaceLocked replaces s's claims by names; wmu held. It returns the
// names that became answerable.
func (r *Registry) replaceLocked(w *wtxn, s *server, names []string, how Source, now time.Time) (added []string, err error) {
	g := s.guid
	fresh := make(map[string]struct{}, len(names))
	for _, n := range names {
		if n != "" && r.nameFits(n) {
			fresh[n] = struct{}{}
		}
	}
	kept := make([]string, 0, len(fresh))
	var removed []string
	for _, n := range s.names {
		if _, ok := fresh[n]; ok {
			kept = append(kept, n)
			delete(fresh, n)
		} else {
			removed = append(removed, n)
		}
	}
	// fresh now holds only names s did not claim; walk the input for order.
	adds := make([]string, 0, len(fresh))
	for _, n := range names {
		if _, ok := fresh[n]; ok {
			adds = append(adds, n)
			delete(fresh, n)
		}
	}
	if room := r.opts.MaxNames - (r.claims - len(removed)); len(adds) > room {
		if room < 0 {
			room = 0
		}
		dropped := len(adds) - room
		adds = adds[:room]
		r.st.nameLimit.Add(uint64(dropped))
		r.limited("names", "name limit reached; names dropped",
			zap.Int("max_names", r.opts.MaxNames), zap.Stringer("guid", g),
			zap.Int("dropped", dropped), zap.Uint64("dropped_total", r.st.nameLimit.Load()))
		err = ErrNameLimit
	}

	r.reserveIndex(len(adds))
	var dl dupLog
	r.imu.Lock()
	for _, n := range removed {
		if t := r.releaseLocked(w, s, n); t != "" {
			added = append(added, t)
		}
	}
	for _, n := range adds {
		if r.claimLocked(w, s, n, how, now, &dl) {
			added = append(added, n)
		}
	}
	r.imu.Unlock()
	r.claims += len(adds) - len(removed)
	s.names = append(kept, adds...)
	s.extra = nil
	info := s.row.Info
	info.ListedAt, info.ListedHow, info.Verified = now, how, true
	r.putRow(w, s, &info)
	dl.flush(r, s)
	return added, err
}

// AddNames adds claims to g's set, keeping the rest; names already claimed
// by g get how and now as their learned source. The claims are proven over
// TCP (a search-through name confirmed by a TCP search answered under g):
// they confirm a server loaded from a snapshot as a listing does, so a
// server that lists nothing (no `server` PV) is not expired while it
// answers for its names.
func (r *Registry) AddNames(g pva.GUID, names []string, how Source) error {
	var added []string
	var err error
	w, s, end := r.beginOn(g, &added)
	defer end()
	if s == nil {
		return ErrUnknownServer
	}
	now := r.clk.Now()
	var dl dupLog
	if s.extra == nil {
		s.extra = make(map[string]learned)
	}
	r.reserveIndex(len(names))
	r.imu.Lock()
	for _, n := range names {
		if n == "" || !r.nameFits(n) {
			continue
		}
		if _, ok := s.extra[n]; ok || r.claimsLocked(w, s, n) {
			s.extra[n] = learned{how, now}
			continue
		}
		if r.claims >= r.opts.MaxNames {
			r.st.nameLimit.Add(1)
			r.limited("names", "name limit reached; names dropped",
				zap.Int("max_names", r.opts.MaxNames), zap.Stringer("guid", g),
				zap.Uint64("dropped_total", r.st.nameLimit.Load()))
			err = ErrNameLimit
			continue
		}
		if r.claimLocked(w, s, n, how, now, &dl) {
			added = append(added, n)
		}
		r.claims++
		s.names = append(s.names, n)
		s.extra[n] = learned{how, now}
	}
	r.imu.Unlock()
	info := s.row.Info
	info.Verified = true
	r.putRow(w, s, &info)
	r.commit(w)
	dl.flush(r, s)
	return err
}

// claimsLocked reports whether s already claims n (held or duplicate).
func (r *Registry) claimsLocked(w *wtxn, s *server, n string) bool {
	slot, dups, ok := r.idx.holder(n)
	if !ok {
		return false
	}
	return slot == s.slot || dups > 0 && w.conflict(n, s.guid) != nil
}

// dupLog bounds duplicate logging to a few lines per operation.
type dupLog struct {
	n     int
	first []string
	other map[uint32]bool
}

func (d *dupLog) add(name string, holder uint32) {
	d.n++
	if len(d.first) < 5 {
		d.first = append(d.first, name)
	}
	if d.other == nil {
		d.other = make(map[uint32]bool)
	}
	d.other[holder] = true
}

func (d *dupLog) flush(r *Registry, s *server) {
	if d.n == 0 {
		return
	}
	for slot := range d.other {
		h := r.holders[slot]
		r.log.Warn("duplicate PV names: first claim kept",
			zap.Stringer("holder_guid", h.GUID), zap.Stringer("holder", h.Addr),
			zap.Stringer("claimant_guid", s.guid), zap.Stringer("claimant", s.row.Info.Addr),
			zap.Int("names", d.n), zap.Strings("examples", d.first))
	}
}

// claimLocked records s's claim on n (not yet claimed by s); imu and wmu
// held. It reports whether s became the holder.
func (r *Registry) claimLocked(w *wtxn, s *server, n string, how Source, now time.Time, dl *dupLog) bool {
	if slot, ok := r.idx.get(n); ok {
		r.seq++
		w.insert(tabConflicts, &conflictRow{Name: n, Holder: r.holders[slot].GUID, Claimant: s.guid, Seq: r.seq, Since: now, How: how})
		r.idx.addDups(n, 1)
		r.st.dups.Add(1)
		dl.add(n, slot)
		return false
	}
	r.idx.set(n, s.slot)
	r.gen.Add(1)
	s.held++
	return true
}

// releaseLocked drops s's claim on n; imu and wmu held. If s held n and
// another server claims it, the earliest claimant takes over and n is
// returned (the name is answerable by a new server).
func (r *Registry) releaseLocked(w *wtxn, s *server, n string) string {
	slot, dups, ok := r.idx.holder(n)
	if !ok || slot != s.slot {
		if dups > 0 {
			if c := w.conflict(n, s.guid); c != nil {
				w.delete(tabConflicts, c)
				r.idx.addDups(n, -1)
			}
		}
		return ""
	}
	s.held--
	r.gen.Add(1)
	if dups == 0 {
		r.idx.delete(n)
		return ""
	}
	rows := w.conflictsOn(n)
	next := rows[0]
	ns := w.server(next.Claimant)
	w.delete(tabConflicts, next)
	r.idx.addDups(n, -1)
	r.idx.set(next.Name, ns.slot) // the claimant's copy of the string, so s's can go
	ns.held++
	for _, c := range rows[1:] {
		cc := *c
		cc.Holder = ns.guid
		w.insert(tabConflicts, &cc)
	}
	if ns.row != nil {
		info := ns.row.Info
		r.putRow(w, ns, &info)
	}
	r.st.takeovers.Add(1)
	r.log.Info("duplicate PV name taken over", zap.String("name", n),
		zap.Stringer("old_guid", s.guid), zap.Stringer("guid", ns.guid), zap.Stringer("endpoint", ns.row.Info.Addr))
	return n
}
