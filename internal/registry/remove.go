// Removal: how a server leaves — RemoveServer on TCP evidence, Listed
// replacing it at its endpoint (through removeLocked), and the expiry of
// servers loaded from a snapshot and never confirmed.

package registry

import (
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/pva"
)

// RemoveServer removes g and every claim it made; names it held pass to
// their earliest other claimant.
func (r *Registry) RemoveServer(g pva.GUID) error {
	var added []string
	w, s, end := r.beginOn(g, &added)
	defer end()
	if s == nil {
		return ErrUnknownServer
	}
	added = r.removeLocked(w, s)
	r.commit(w)
	r.shrinkIndex()
	return nil
}

func (r *Registry) removeLocked(w *wtxn, s *server) (added []string) {
	r.imu.Lock()
	for _, n := range s.names {
		if t := r.releaseLocked(w, s, n); t != "" {
			added = append(added, t)
		}
	}
	r.holders[s.slot] = nil
	r.imu.Unlock()
	r.claims -= len(s.names)
	if !s.row.Info.Verified {
		r.unverified--
	}
	w.delete(tabServers, s.row)
	r.free = append(r.free, s.slot)
	return added
}

// expireUnverified removes servers loaded from a snapshot and not confirmed
// within UnverifiedTTL of their load, as of now. It returns how many.
func (r *Registry) expireUnverified(now time.Time) int {
	var added []string
	w, end := r.begin(&added)
	defer end()
	var all []*server
	it, _ := w.t.Get(tabServers, "id")
	for o := it.Next(); o != nil; o = it.Next() {
		all = append(all, o.(*serverRow).srv)
	}
	n := 0
	for _, s := range all {
		if s.row.Info.Verified || now.Before(s.row.Info.LoadedAt.Add(r.opts.UnverifiedTTL)) {
			continue
		}
		r.log.Info("dropping unconfirmed server from snapshot", zap.Stringer("guid", s.guid),
			zap.Stringer("endpoint", s.row.Info.Addr), zap.Int("names", len(s.names)))
		added = append(added, r.removeLocked(w, s)...)
		n++
	}
	r.commit(w)
	r.shrinkIndex()
	r.st.expired.Add(uint64(n))
	return n
}
