package registry

import (
	"bytes"
	"context"
	"github.com/pvans-project/pvans/internal/glob"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	memdb "github.com/hashicorp/go-memdb"
	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
)

// Options configure a Registry. Zero values take the defaults.
type Options struct {
	// MaxServers bounds the servers table; default 20,000 (a PVXS
	// client's beacon tracking limit).
	MaxServers int
	// MaxNames bounds claims (server, name) pairs; default 5,000,000.
	MaxNames int
	// FieldNames answers record.FIELD from the claimant of record.
	FieldNames bool
	// MaxNameBytes: a listed or learned name longer than this is dropped
	// (counted): no client could search for it. 0 = no bound.
	MaxNameBytes int
	// UnverifiedTTL is how long servers loaded from a snapshot are kept
	// without confirmation; default 2 minutes.
	UnverifiedTTL time.Duration
	Clock         clock.Clock
	Logger        *zap.Logger
}

// Defaults for zero Options fields: the same values as config.Defaults
// (the daemon always passes its own; a test checks they agree).
const (
	DefaultMaxServers    = 20000
	DefaultMaxNames      = 5_000_000
	DefaultUnverifiedTTL = 10 * time.Minute
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

// Registry is safe for concurrent use.
type Registry struct {
	opts Options // MaxServers, MaxNames and UnverifiedTTL: read and set with wmu held
	// fieldNames is Options.FieldNames, read lock-free by lookups.
	fieldNames atomic.Bool
	log        *zap.Logger
	clk        clock.Clock
	// db holds every server and every duplicate claim; the writer changes
	// it in transactions (wtxn), readers read it without a registry lock.
	db *memdb.MemDB

	// wmu serializes every mutation and owns the fields below it.
	wmu        sync.Mutex
	free       []uint32 // slots of removed servers, reused first
	claims     int
	unverified int    // servers loaded from a snapshot and not confirmed
	seq        uint64 // claim order of duplicate claims
	rev        uint64 // the last revision committed
	expiry     clock.Timer
	loadedAt   time.Time // when the snapshot was loaded (expiry runs from it)
	limitLog   map[string]time.Time

	// imu publishes idx and holders to readers; written only with wmu held.
	imu sync.RWMutex
	idx nameIndex
	// holders is the slot table: holders[slot] is the Holder of the
	// server with that slot, nil for a free slot.
	holders []*Holder

	subMu      sync.Mutex
	subs       []func(added []string)
	changeSubs []func()
	// gen moves whenever the answerable set (name → holder) changes;
	// notifiedGen is the last value change subscribers were told about.
	gen, notifiedGen atomic.Uint64

	st struct {
		serverLimit, nameLimit, dups, takeovers, expired, replaced, nameLength atomic.Uint64
		hintsRefused, guidElsewhere, identityRefused                           atomic.Uint64
	}
}

// New returns an empty registry.
func New(o Options) *Registry {
	if o.MaxServers <= 0 {
		o.MaxServers = DefaultMaxServers
	}
	if o.MaxNames <= 0 {
		o.MaxNames = DefaultMaxNames
	}
	if o.UnverifiedTTL <= 0 {
		o.UnverifiedTTL = DefaultUnverifiedTTL
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	db, err := memdb.NewMemDB(schema())
	if err != nil {
		panic(err) // the schema is a constant
	}
	r := &Registry{
		opts: o, log: o.Logger, clk: o.Clock, db: db,
		limitLog: make(map[string]time.Time),
		idx:      newNameIndex(),
	}
	r.fieldNames.Store(o.FieldNames)
	// The first revision is the clock's microseconds, so a restarted
	// daemon does not repeat the last run's revisions (a client holding
	// one would wait for the next change as if nothing had happened). It
	// stays under 2^53, exact as a JSON number in a browser, until 2255.
	r.rev = uint64(max(o.Clock.Now().UnixMicro(), 0))
	w := r.write()
	w.changed = true // the first revision: empty
	r.commit(w)
	return r
}

// serverCount is the number of servers; wmu held.
func (r *Registry) serverCount() int { return len(r.holders) - len(r.free) }

// Limits are the options a running registry can change (a configuration
// reload). Zero MaxServers, MaxNames or UnverifiedTTL keep the current one.
type Limits struct {
	MaxServers    int
	MaxNames      int
	UnverifiedTTL time.Duration
	FieldNames    bool
	MaxNameBytes  int // applied as given: 0 = no bound
}

// SetLimits applies new limits. A raised bound admits more at once. A
// lowered one removes nothing: registrations beyond it are refused until
// servers leave the natural way (lost, replaced, expired) and the counts
// fall below it. A changed UnverifiedTTL re-arms the expiry of servers
// loaded from a snapshot and not yet confirmed.
func (r *Registry) SetLimits(l Limits) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if l.MaxServers > 0 {
		r.opts.MaxServers = l.MaxServers
	}
	if l.MaxNames > 0 {
		r.opts.MaxNames = l.MaxNames
	}
	if l.UnverifiedTTL > 0 && l.UnverifiedTTL != r.opts.UnverifiedTTL {
		r.opts.UnverifiedTTL = l.UnverifiedTTL
		if r.expiry != nil {
			r.expiry.Stop()
			wait := max(r.loadedAt.Add(l.UnverifiedTTL).Sub(r.clk.Now()), 0)
			r.expiry = r.clk.AfterFunc(wait, func() { r.expireUnverified(r.clk.Now()) })
		}
	}
	r.fieldNames.Store(l.FieldNames)
	r.opts.MaxNameBytes = l.MaxNameBytes
}

// Subscribe registers f to be called after every commit that makes names
// answerable (new holder, takeover, snapshot load), with those names. f is
// called on the committing goroutine after the registry's locks are
// released; it must not block. Field names are not expanded: a waiter for
// "rec.VAL" must watch for "rec" (see RecordOf).
func (r *Registry) Subscribe(f func(added []string)) {
	r.subMu.Lock()
	r.subs = append(r.subs, f)
	r.subMu.Unlock()
}

// SubscribeChanges registers f to be called after every commit that
// changed the answerable set: a name became answerable, stopped being
// answerable, or passed to another server. Called like Subscribe's f;
// commits that race may be reported by one call.
func (r *Registry) SubscribeChanges(f func()) {
	r.subMu.Lock()
	r.changeSubs = append(r.changeSubs, f)
	r.subMu.Unlock()
}

func (r *Registry) notify(added []string) {
	if g := r.gen.Load(); r.notifiedGen.Swap(g) != g {
		r.subMu.Lock()
		cs := r.changeSubs
		r.subMu.Unlock()
		for _, f := range cs {
			f()
		}
	}
	if len(added) == 0 {
		return
	}
	r.subMu.Lock()
	subs := r.subs
	r.subMu.Unlock()
	for _, f := range subs {
		f(added)
	}
}

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

// maxProbeError is the most of a probe error kept per server: it can carry
// a server's status message, of any length.
const maxProbeError = 256

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

func addrKey(r *ServerInfo) string {
	if !r.Addr.IsValid() {
		return ""
	}
	return r.Addr.String()
}

// UpsertServer records a hint: a beacon, discovery reply or search-through
// reply named the server, or a static name file configured it. It is the
// UDP side of the trust rule (see the package doc): it may create a server
// that has no names yet and refresh a known server's LastSeen, change count
// and version, but it never removes a server, moves one to another
// endpoint, touches a name or confirms a server loaded from a snapshot.
//
// A GUID unknown to the registry at an endpoint another server holds is a
// restart claim (or a forgery): nothing is recorded and ErrEndpointHeld is
// returned; the caller verifies the claim over TCP, and Listed applies it.
// A known GUID named at another endpoint is refreshed but stays where it
// is (ErrEndpointHeld too). Servers whose names come from a static name
// file (ListedHow SourceStatic, or in.Discovered SourceStatic) are claims of
// their own and share an endpoint with a real server. It returns whether
// the server is new, or ErrServerLimit.
func (r *Registry) UpsertServer(in ServerInfo) (created bool, err error) {
	now := r.clk.Now()
	if in.Protocol == "" {
		in.Protocol = "tcp"
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()

	w := r.write()
	defer w.abort()
	s := w.server(in.GUID)
	if s == nil && in.Addr.IsValid() && in.Discovered != SourceStatic && len(othersAt(w, in.Addr, in.GUID)) > 0 {
		r.st.hintsRefused.Add(1)
		return false, ErrEndpointHeld
	}
	if s == nil {
		if r.serverCount() >= r.opts.MaxServers {
			r.st.serverLimit.Add(1)
			r.limited("servers", "server limit reached; server not tracked",
				zap.Int("max_servers", r.opts.MaxServers), zap.Stringer("guid", in.GUID),
				zap.Stringer("endpoint", in.Addr), zap.Uint64("refused_total", r.st.serverLimit.Load()))
			return false, ErrServerLimit
		}
		r.createLocked(w, in, now)
		r.commit(w)
		return true, nil
	}
	info := s.row.Info
	if in.Addr != info.Addr || in.Protocol != info.Protocol {
		r.st.hintsRefused.Add(1)
		err = ErrEndpointHeld
	} else {
		info.LastSeen = now
		if !in.LastSeen.IsZero() {
			info.LastSeen = in.LastSeen
		}
		info.ChangeCount = in.ChangeCount
		info.Version = in.Version
	}
	if info.Discovered == SourceUnknown {
		info.Discovered = in.Discovered
	}
	r.putRow(w, s, &info)
	r.commit(w)
	return false, err
}

// createLocked inserts a new server without names.
func (r *Registry) createLocked(w *wtxn, in ServerInfo, now time.Time) *server {
	info := in
	if info.FirstSeen.IsZero() {
		info.FirstSeen = now
	}
	if info.LastSeen.IsZero() {
		info.LastSeen = now
	}
	info.Names, info.Held, info.Verified, info.LoadedAt = 0, 0, true, time.Time{}
	r.imu.Lock()
	s := r.newServerLocked(&info)
	r.imu.Unlock()
	r.putRow(w, s, &info)
	return s
}

// othersAt returns the servers other than g registered at ep, except those
// whose names come from a static name file.
func othersAt(w *wtxn, ep netip.AddrPort, g pva.GUID) []*server {
	var out []*server
	for _, row := range w.serversAt(ep) {
		if row.GUID != g && row.Info.ListedHow != SourceStatic {
			out = append(out, row.srv)
		}
	}
	return out
}

// Listed records what a TCP exchange with in.Addr proved: the server
// in.GUID listens there and claims exactly names (a probe's listing). It is
// the only way a server replaces another: every other server registered at
// in.Addr is gone (one endpoint, one listener), so it is removed, and the
// names it held that in.GUID lists pass to in.GUID directly — they keep
// answering and never pass to another claimant in between. Servers whose
// names come from a static name file at the same endpoint stay.
//
// in.TLS is the TLS endpoint the same exchange learned (zero: none): it
// replaces the one known before, so a server that stopped offering TLS is
// no longer named to TLS clients by it.
//
// A GUID registered at another endpoint is not moved (ErrGUIDElsewhere):
// anyone can present any GUID over TCP at an endpoint of their own, so
// only the loss of the old endpoint's watch connection frees the GUID.
func (r *Registry) Listed(in ServerInfo, names []string, how Source) (replaced []pva.GUID, err error) {
	now := r.clk.Now()
	if in.Protocol == "" {
		in.Protocol = "tcp"
	}
	if in.TLS.IsValid() && in.TLS.Addr() != in.Addr.Addr() {
		in.TLS = netip.AddrPort{} // see ServerInfo.TLS
	}
	var added []string
	w, end := r.begin(&added)
	defer end()
	s := w.server(in.GUID)
	if s != nil && s.row.Info.Addr != in.Addr {
		r.st.guidElsewhere.Add(1)
		return nil, ErrGUIDElsewhere
	}
	olds := othersAt(w, in.Addr, in.GUID)
	for _, o := range olds {
		// A certificate strengthens the trust rule: a TLS-proven server is
		// replaced only by one proving the same identity; anyone else waits
		// for the old one's watch to end (RemoveServer).
		if id := o.row.Info.Identity; id != "" && in.Identity != id {
			r.st.identityRefused.Add(1)
			return nil, ErrIdentity
		}
	}
	if s == nil {
		if r.serverCount()-len(olds) >= r.opts.MaxServers {
			r.st.serverLimit.Add(1)
			r.limited("servers", "server limit reached; server not tracked",
				zap.Int("max_servers", r.opts.MaxServers), zap.Stringer("guid", in.GUID),
				zap.Stringer("endpoint", in.Addr), zap.Uint64("refused_total", r.st.serverLimit.Load()))
			return nil, ErrServerLimit
		}
		s = r.createLocked(w, in, now)
	}
	if len(olds) > 0 {
		listed := make(map[string]struct{}, len(names))
		for _, n := range names {
			listed[n] = struct{}{}
		}
		for _, o := range olds {
			r.log.Debug("server restarted: new GUID confirmed over TCP at its endpoint",
				zap.Stringer("old_guid", o.guid), zap.Stringer("guid", s.guid), zap.Stringer("endpoint", in.Addr))
			r.handOverLocked(w, o, s, listed)
			added = append(added, r.removeLocked(w, o)...)
			replaced = append(replaced, o.guid)
			r.st.replaced.Add(1)
		}
	}
	a, err := r.replaceLocked(w, s, names, how, now)
	added = append(added, a...)
	info := s.row.Info
	info.LastSeen = now
	if in.Version != 0 {
		info.Version = in.Version
	}
	if info.Discovered == SourceUnknown {
		info.Discovered = in.Discovered
	}
	if in.Protocol != info.Protocol || in.TLS != info.TLS {
		info.Protocol, info.TLS = in.Protocol, in.TLS
		r.setHolderLocked(s, &info)
	}
	info.Identity = in.Identity
	r.putRow(w, s, &info)
	r.commit(w)
	r.shrinkIndex()
	return replaced, err
}

// handOverLocked makes s the holder of every name o holds that s lists, in
// place: the index entry changes server, no reader sees the name missing
// and no duplicate claimant takes it over.
func (r *Registry) handOverLocked(w *wtxn, o, s *server, listed map[string]struct{}) {
	r.imu.Lock()
	defer r.imu.Unlock()
	keep := make([]string, 0, len(o.names))
	for _, n := range o.names {
		slot, dups, ok := r.idx.holder(n)
		if _, want := listed[n]; !want || !ok || slot != o.slot {
			keep = append(keep, n)
			continue
		}
		if dups > 0 {
			if c := w.conflict(n, s.guid); c != nil {
				// s claimed it as a duplicate: it is no longer one.
				w.delete(tabConflicts, c)
				r.idx.addDups(n, -1)
				r.claims-- // o's claim goes below, s's stays
			} else {
				s.names = append(s.names, n)
			}
			for _, c := range w.conflictsOn(n) {
				if c.Holder == o.guid {
					cc := *c
					cc.Holder = s.guid
					w.insert(tabConflicts, &cc)
				}
			}
		} else {
			s.names = append(s.names, n)
		}
		r.idx.set(n, s.slot)
		r.gen.Add(1)
		o.held--
		s.held++
	}
	o.names = keep
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

// SetProbeState records the prober's state for a server. Connected and
// Listed confirm a server loaded from a snapshot.
func (r *Registry) SetProbeState(g pva.GUID, st ProbeState, probeErr error) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	w := r.write()
	defer w.abort()
	s := w.server(g)
	if s == nil {
		return ErrUnknownServer
	}
	info := s.row.Info
	info.ProbeState, info.ProbedAt, info.ProbeError = st, r.clk.Now(), ""
	if probeErr != nil {
		info.ProbeError = probeErr.Error()
		if len(info.ProbeError) > maxProbeError {
			// It can carry the server's own status message.
			info.ProbeError = strings.ToValidUTF8(info.ProbeError[:maxProbeError], "") + "…"
		}
	}
	if st == ProbeConnected || st == ProbeListed {
		info.Verified = true
	}
	r.putRow(w, s, &info)
	r.commit(w)
	return nil
}

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
// by g get how and now as their learned source.
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

// Stats returns the monotonic counters.
func (r *Registry) Stats() Stats {
	return Stats{
		ServerLimitDrops:  r.st.serverLimit.Load(),
		NameLimitDrops:    r.st.nameLimit.Load(),
		NameLengthDrops:   r.st.nameLength.Load(),
		DuplicateClaims:   r.st.dups.Load(),
		Takeovers:         r.st.takeovers.Load(),
		UnverifiedExpired: r.st.expired.Load(),
		EndpointReplaced:  r.st.replaced.Load(),
		HintsRefused:      r.st.hintsRefused.Load(),
		GUIDElsewhere:     r.st.guidElsewhere.Load(),
		IdentityRefused:   r.st.identityRefused.Load(),
	}
}

// Close stops the unverified-expiry timer.
func (r *Registry) Close() {
	r.wmu.Lock()
	if r.expiry != nil {
		r.expiry.Stop()
	}
	r.wmu.Unlock()
}
