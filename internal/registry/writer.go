package registry

import (
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/pva"
)

// learned is how and when one name was added outside a listing.
type learned struct {
	how Source
	at  time.Time
}

// server is the writer's state for one server: what memdb cannot hold
// cheaply (its name set and learned sources, per name). It is reachable
// only from the server's row; read and changed with wmu held.
type server struct {
	slot  uint32
	guid  pva.GUID
	names []string // every claim, held or not; shares strings with the index
	extra map[string]learned
	held  int
	row   *serverRow // the version of its row memdb holds now
}

// serverCount is the number of servers; wmu held.
func (r *Registry) serverCount() int { return len(r.holders) - len(r.free) }

// begin starts a change: the writer lock and a memdb write transaction.
// The caller defers end, which aborts what was not committed, unlocks and
// then tells subscribers about the names in *added.
func (r *Registry) begin(added *[]string) (*wtxn, func()) {
	r.wmu.Lock()
	w := r.write()
	return w, func() {
		w.abort()
		r.wmu.Unlock()
		r.notify(*added)
	}
}

// beginOn is begin for a change to server g; s is nil if g is unknown.
func (r *Registry) beginOn(g pva.GUID, added *[]string) (w *wtxn, s *server, end func()) {
	w, end = r.begin(added)
	return w, w.server(g), end
}

// newServerLocked gives a new server a slot and its Holder; wmu and imu
// held. Its row is inserted by putRow.
func (r *Registry) newServerLocked(info *ServerInfo) *server {
	h := &Holder{GUID: info.GUID, Addr: info.Addr, Protocol: info.Protocol, TLSPort: info.TLS.Port()}
	if n := len(r.free); n > 0 {
		h.ID, r.free = r.free[n-1], r.free[:n-1]
		r.holders[h.ID] = h
	} else {
		h.ID = uint32(len(r.holders))
		r.holders = append(r.holders, h)
	}
	return &server{slot: h.ID, guid: info.GUID}
}

// setHolderLocked gives s a new Holder (Holders are immutable); wmu held.
func (r *Registry) setHolderLocked(s *server, info *ServerInfo) {
	h := &Holder{ID: s.slot, GUID: s.guid, Addr: info.Addr, Protocol: info.Protocol, TLSPort: info.TLS.Port()}
	r.imu.Lock()
	r.holders[s.slot] = h
	r.imu.Unlock()
}

// putRow stores info, with s's name counts, as s's row: a new row, since
// rows are immutable, and none when nothing changed, so that watchers are
// woken only by changes.
func (r *Registry) putRow(w *wtxn, s *server, info *ServerInfo) {
	info.Names, info.Held = len(s.names), s.held
	old := s.row
	if old != nil && old.Info == *info {
		return
	}
	if old != nil && !old.Info.Verified {
		r.unverified--
	}
	if !info.Verified {
		r.unverified++
	}
	row := &serverRow{GUID: s.guid, Slot: s.slot, AddrKey: addrKey(info), Info: *info, srv: s}
	w.insert(tabServers, row)
	s.row = row
}

func addrKey(r *ServerInfo) string {
	if !r.Addr.IsValid() {
		return ""
	}
	return r.Addr.String()
}

// nameFits applies MaxNameBytes (counting and logging a refusal); wmu held.
func (r *Registry) nameFits(n string) bool {
	if r.opts.MaxNameBytes <= 0 || len(n) <= r.opts.MaxNameBytes {
		return true
	}
	r.st.nameLength.Add(1)
	r.limited("name_length", "name longer than the bound dropped",
		zap.Int("bytes", len(n)), zap.Int("max_name_bytes", r.opts.MaxNameBytes))
	return false
}

// limited logs msg at most once a minute per kind; the counters carry the
// full story.
func (r *Registry) limited(kind, msg string, fields ...zap.Field) {
	now := r.clk.Now()
	if t, ok := r.limitLog[kind]; ok && now.Sub(t) < time.Minute {
		return
	}
	r.limitLog[kind] = now
	r.log.Warn(msg, fields...)
}
