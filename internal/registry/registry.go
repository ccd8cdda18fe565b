package registry

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	memdb "github.com/hashicorp/go-memdb"
	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
)

// Options configure a Registry. The bounds are the daemon's settings
// (Apply), which it passes before anything is registered; a zero bound
// here is no bound.
type Options struct {
	// MaxServers bounds the servers table; 0 = no bound.
	MaxServers int
	// MaxNames bounds claims (server, name) pairs; 0 = no bound.
	MaxNames int
	// FieldNames answers record.FIELD from the claimant of record.
	FieldNames bool
	// MaxNameBytes: a listed or learned name longer than this is dropped
	// (counted): no client could search for it. 0 = no bound.
	MaxNameBytes int
	// UnverifiedTTL is how long servers loaded from a snapshot are kept
	// without confirmation; 0 = until confirmed or lost.
	UnverifiedTTL time.Duration
	Clock         clock.Clock
	Logger        *zap.Logger
}

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
	handedSubs []func(names []string)
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
		o.MaxServers = math.MaxInt
	}
	if o.MaxNames <= 0 {
		o.MaxNames = math.MaxInt
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
// Each field's tag names the setting it takes (config.Fill).
type Limits struct {
	MaxServers    int           `setting:"registry.max_servers"`
	MaxNames      int           `setting:"registry.max_names"`
	UnverifiedTTL time.Duration `setting:"snapshot.unverified_window"`
	FieldNames    bool          `setting:"registry.field_names"`
	MaxNameBytes  int           `setting:"search.max_name_bytes"` // applied as given: 0 = no bound
}

// Apply applies new limits. A raised bound admits more at once. A
// lowered one removes nothing: registrations beyond it are refused until
// servers leave the natural way (lost, replaced, expired) and the counts
// fall below it. A changed UnverifiedTTL re-arms the expiry of servers
// loaded from a snapshot and not yet confirmed.
func (r *Registry) Apply(l Limits) {
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
		if !r.loadedAt.IsZero() {
			if r.expiry != nil {
				r.expiry.Stop()
			}
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

// SubscribeHandedOver registers f to be called after every commit in
// which names passed in place to another server — a server listed at the
// endpoint of one it replaces (Listed) — with those names. Subscribe is
// not told of them: they never stopped being answerable. Called like
// Subscribe's f, after it.
func (r *Registry) SubscribeHandedOver(f func(names []string)) {
	r.subMu.Lock()
	r.handedSubs = append(r.handedSubs, f)
	r.subMu.Unlock()
}

func (r *Registry) notifyHanded(names []string) {
	if len(names) == 0 {
		return
	}
	r.subMu.Lock()
	subs := r.handedSubs
	r.subMu.Unlock()
	for _, f := range subs {
		f(names)
	}
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
