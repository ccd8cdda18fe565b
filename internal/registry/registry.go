package registry

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
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
	// MaxServers bounds the servers table; default 20,000 (the spec's
	// beacon tracking limit).
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

const (
	tabServers   = "servers"
	tabConflicts = "conflicts"
)

// serverRow is a row of "servers"; rows are immutable once inserted.
type serverRow struct {
	Key     string // GUID hex
	AddrKey string // Addr.String(), "" if unset
	Info    ServerInfo
}

// conflictRow is a row of "conflicts": Claimant claims Name, held by Holder.
type conflictRow struct {
	Name     string
	Holder   string // GUID hex
	Claimant string // GUID hex
	Seq      uint64 // claim order; the lowest takes over
	Since    time.Time
	How      Source
}

func schema() *memdb.DBSchema {
	return &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		tabServers: {Name: tabServers, Indexes: map[string]*memdb.IndexSchema{
			"id":   {Name: "id", Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Key"}},
			"addr": {Name: "addr", AllowMissing: true, Indexer: &memdb.StringFieldIndex{Field: "AddrKey"}},
		}},
		tabConflicts: {Name: tabConflicts, Indexes: map[string]*memdb.IndexSchema{
			"id": {Name: "id", Unique: true, Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
				&memdb.StringFieldIndex{Field: "Name"}, &memdb.StringFieldIndex{Field: "Claimant"}}}},
			"name":     {Name: "name", Indexer: &memdb.StringFieldIndex{Field: "Name"}},
			"holder":   {Name: "holder", Indexer: &memdb.StringFieldIndex{Field: "Holder"}},
			"claimant": {Name: "claimant", Indexer: &memdb.StringFieldIndex{Field: "Claimant"}},
		}},
	}}
}

// learned is how and when one name was added outside a listing.
type learned struct {
	how Source
	at  time.Time
}

// server is the writer's private state for one server.
type server struct {
	id    uint32
	key   string
	guid  pva.GUID
	names []string // every claim, held or not; shares strings with the index
	extra map[string]learned
	held  int
	row   *serverRow
}

// Registry is safe for concurrent use.
type Registry struct {
	opts Options // MaxServers, MaxNames and UnverifiedTTL: read and set with wmu held
	// fieldNames is Options.FieldNames, read lock-free by lookups.
	fieldNames atomic.Bool
	log        *zap.Logger
	clk        clock.Clock
	db         *memdb.MemDB

	// wmu serializes every mutation and owns the fields below it.
	wmu      sync.Mutex
	byGUID   map[pva.GUID]*server
	byID     []*server
	free     []uint32
	claims   int
	seq      uint64
	dupNames map[string]int // name -> non-holding claimants; avoids a memdb read per release
	expiry   clock.Timer
	loadedAt time.Time // when the snapshot was loaded (expiry runs from it)
	limitLog map[string]time.Time

	// imu publishes idx and holders to readers; written only with wmu held.
	imu     sync.RWMutex
	idx     nameIndex
	holders []*Holder

	subMu      sync.Mutex
	subs       []func(added []string)
	changeSubs []func()
	// gen moves whenever the answerable set (name → holder) changes;
	// notifiedGen is the last value change subscribers were told about.
	gen, notifiedGen atomic.Uint64

	st struct {
		serverLimit, nameLimit, dups, takeovers, expired, replaced, nameLength atomic.Uint64
		hintsRefused, guidElsewhere                                            atomic.Uint64
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
		byGUID:   make(map[pva.GUID]*server),
		dupNames: make(map[string]int),
		limitLog: make(map[string]time.Time),
		idx:      newNameIndex(),
	}
	r.fieldNames.Store(o.FieldNames)
	return r
}

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
			r.expiry = r.clk.AfterFunc(wait, func() { r.ExpireUnverified(r.clk.Now()) })
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

// NameGeneration moves (it never repeats) whenever the answerable set
// changes.
func (r *Registry) NameGeneration() uint64 { return r.gen.Load() }

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

// FieldNames reports whether the record.FIELD rule is on.
func (r *Registry) FieldNames() bool { return r.fieldNames.Load() }

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
	dot := -1
	for i, c := range name {
		if c == '.' {
			dot = i
			break
		}
		if c == '{' {
			return nil, false
		}
	}
	if dot <= 0 {
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

// LookupNames is LookupBatch for names as byte slices.
func (r *Registry) LookupNames(names [][]byte, out []*Holder) {
	out = out[:len(names)]
	var chunk [lookupChunk][]byte
	r.imu.RLock()
	for len(names) > 0 {
		k := copy(chunk[:], names)
		r.lookupMany(&chunk, k, out, r.fieldNames.Load())
		names, out = names[k:], out[k:]
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

func guidKey(g pva.GUID) string { return g.String() }

func addrKey(r *ServerInfo) string {
	if !r.Addr.IsValid() {
		return ""
	}
	return r.Addr.String()
}

// UpsertServer records a hint: a beacon, discovery reply or search-through
// reply named the server, or a static name file configured it. It is the
// UDP side of the trust rule (see the package doc): it may create a server
// that has no names yet, refresh a known server's LastSeen, change count
// and version, and confirm a server loaded from a snapshot, but it never
// removes a server, moves one to another endpoint or touches a name.
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

	txn := r.db.Txn(true)
	defer txn.Abort()
	s := r.byGUID[in.GUID]
	if s == nil && in.Addr.IsValid() && in.Discovered != SourceStatic && len(r.othersAtLocked(txn, in.Addr, in.GUID)) > 0 {
		r.st.hintsRefused.Add(1)
		return false, ErrEndpointHeld
	}
	if s == nil {
		if len(r.byGUID) >= r.opts.MaxServers {
			r.st.serverLimit.Add(1)
			r.limited("servers", "server limit reached; server not tracked",
				zap.Int("max_servers", r.opts.MaxServers), zap.Stringer("guid", in.GUID),
				zap.Stringer("endpoint", in.Addr), zap.Uint64("refused_total", r.st.serverLimit.Load()))
			return false, ErrServerLimit
		}
		r.createLocked(txn, in, now)
		txn.Commit()
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
	r.putRow(txn, s, &info)
	txn.Commit()
	return false, err
}

// createLocked inserts a new server without names.
func (r *Registry) createLocked(txn *memdb.Txn, in ServerInfo, now time.Time) *server {
	info := in
	if info.FirstSeen.IsZero() {
		info.FirstSeen = now
	}
	if info.LastSeen.IsZero() {
		info.LastSeen = now
	}
	info.Names, info.Held, info.Verified, info.LoadedAt = 0, 0, true, time.Time{}
	s := r.newServerLocked(in.GUID)
	r.setHolderLocked(s, &info)
	r.putRow(txn, s, &info)
	return s
}

// othersAtLocked returns the servers other than g registered at ep, except
// those whose names come from a static name file.
func (r *Registry) othersAtLocked(txn *memdb.Txn, ep netip.AddrPort, g pva.GUID) []*server {
	it, _ := txn.Get(tabServers, "addr", ep.String())
	var out []*server
	for o := it.Next(); o != nil; o = it.Next() {
		row := o.(*serverRow)
		if row.Info.GUID == g || row.Info.ListedHow == SourceStatic {
			continue
		}
		if s := r.byGUID[row.Info.GUID]; s != nil {
			out = append(out, s)
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
// A GUID registered at another endpoint is not moved (ErrGUIDElsewhere):
// anyone can present any GUID over TCP at an endpoint of their own, so
// only the loss of the old endpoint's watch connection frees the GUID.
func (r *Registry) Listed(in ServerInfo, names []string, how Source) (replaced []pva.GUID, err error) {
	now := r.clk.Now()
	if in.Protocol == "" {
		in.Protocol = "tcp"
	}
	r.wmu.Lock()
	var added []string
	defer func() { r.wmu.Unlock(); r.notify(added) }()
	txn := r.db.Txn(true)
	defer txn.Abort()
	s := r.byGUID[in.GUID]
	if s != nil && s.row.Info.Addr != in.Addr {
		r.st.guidElsewhere.Add(1)
		return nil, ErrGUIDElsewhere
	}
	olds := r.othersAtLocked(txn, in.Addr, in.GUID)
	if s == nil {
		if len(r.byGUID)-len(olds) >= r.opts.MaxServers {
			r.st.serverLimit.Add(1)
			r.limited("servers", "server limit reached; server not tracked",
				zap.Int("max_servers", r.opts.MaxServers), zap.Stringer("guid", in.GUID),
				zap.Stringer("endpoint", in.Addr), zap.Uint64("refused_total", r.st.serverLimit.Load()))
			return nil, ErrServerLimit
		}
		s = r.createLocked(txn, in, now)
	}
	if len(olds) > 0 {
		listed := make(map[string]struct{}, len(names))
		for _, n := range names {
			listed[n] = struct{}{}
		}
		for _, o := range olds {
			r.log.Info("server restarted: new GUID confirmed over TCP at its endpoint",
				zap.Stringer("old_guid", o.guid), zap.Stringer("guid", s.guid), zap.Stringer("endpoint", in.Addr))
			r.handOverLocked(txn, o, s, listed)
			added = append(added, r.removeLocked(txn, o)...)
			replaced = append(replaced, o.guid)
			r.st.replaced.Add(1)
		}
	}
	a, err := r.replaceLocked(txn, s, names, how, now)
	added = append(added, a...)
	info := s.row.Info
	info.LastSeen = now
	if in.Version != 0 {
		info.Version = in.Version
	}
	if info.Discovered == SourceUnknown {
		info.Discovered = in.Discovered
	}
	if in.Protocol != info.Protocol {
		info.Protocol = in.Protocol
		r.setHolderLocked(s, &info)
	}
	r.putRow(txn, s, &info)
	txn.Commit()
	r.shrinkIndex()
	return replaced, err
}

// handOverLocked makes s the holder of every name o holds that s lists, in
// place: the index entry changes server, no reader sees the name missing
// and no duplicate claimant takes it over.
func (r *Registry) handOverLocked(txn *memdb.Txn, o, s *server, listed map[string]struct{}) {
	r.imu.Lock()
	defer r.imu.Unlock()
	keep := make([]string, 0, len(o.names))
	for _, n := range o.names {
		id, ok := r.idx.get(n)
		if _, want := listed[n]; !want || !ok || id != o.id {
			keep = append(keep, n)
			continue
		}
		if r.dupNames[n] > 0 {
			if c, _ := txn.First(tabConflicts, "id", n, s.key); c != nil {
				// s claimed it as a duplicate: it is no longer one.
				_ = txn.Delete(tabConflicts, c)
				r.decDup(n)
				r.claims-- // o's claim goes below, s's stays
			} else {
				s.names = append(s.names, n)
			}
			it, _ := txn.Get(tabConflicts, "name", n)
			var rows []*conflictRow
			for c := it.Next(); c != nil; c = it.Next() {
				rows = append(rows, c.(*conflictRow))
			}
			for _, c := range rows {
				if c.Holder == o.key {
					cc := *c
					cc.Holder = s.key
					_ = txn.Insert(tabConflicts, &cc)
				}
			}
		} else {
			s.names = append(s.names, n)
		}
		r.idx.set(n, s.id)
		r.gen.Add(1)
		o.held--
		s.held++
	}
	o.names = keep
}

func (r *Registry) newServerLocked(g pva.GUID) *server {
	s := &server{guid: g, key: guidKey(g)}
	if n := len(r.free); n > 0 {
		s.id = r.free[n-1]
		r.free = r.free[:n-1]
		r.byID[s.id] = s
	} else {
		s.id = uint32(len(r.byID))
		r.byID = append(r.byID, s)
	}
	r.byGUID[g] = s
	return s
}

func (r *Registry) setHolderLocked(s *server, info *ServerInfo) {
	h := &Holder{ID: s.id, GUID: s.guid, Addr: info.Addr, Protocol: info.Protocol}
	r.imu.Lock()
	for int(s.id) >= len(r.holders) {
		r.holders = append(r.holders, nil)
	}
	r.holders[s.id] = h
	r.imu.Unlock()
}

func (r *Registry) putRow(txn *memdb.Txn, s *server, info *ServerInfo) {
	info.Names, info.Held = len(s.names), s.held
	row := &serverRow{Key: s.key, AddrKey: addrKey(info), Info: *info}
	if err := txn.Insert(tabServers, row); err != nil {
		panic(fmt.Sprintf("registry: insert server: %v", err)) // schema invariant
	}
	s.row = row
}

// SetProbeState records the prober's state for a server. Connected and
// Listed confirm a server loaded from a snapshot.
func (r *Registry) SetProbeState(g pva.GUID, st ProbeState, probeErr error) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	s := r.byGUID[g]
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
	txn := r.db.Txn(true)
	r.putRow(txn, s, &info)
	txn.Commit()
	return nil
}

// ReplaceNames replaces the whole set of names g claims (a probe result) in
// one transaction: readers see the old set or the new one, never a mix.
// Names held before and listed again keep answering without a gap. At
// MaxNames the names that do not fit are dropped (counted) and ErrNameLimit
// is returned with the rest applied.
func (r *Registry) ReplaceNames(g pva.GUID, names []string, how Source) error {
	r.wmu.Lock()
	var added []string
	defer func() { r.wmu.Unlock(); r.notify(added) }()
	s := r.byGUID[g]
	if s == nil {
		return ErrUnknownServer
	}
	txn := r.db.Txn(true)
	defer txn.Abort()
	added, err := r.replaceLocked(txn, s, names, how, r.clk.Now())
	info := s.row.Info
	r.putRow(txn, s, &info)
	txn.Commit()
	r.shrinkIndex()
	return err
}

// replaceLocked replaces s's claims by names; wmu held. It returns the
// names that became answerable.
func (r *Registry) replaceLocked(txn *memdb.Txn, s *server, names []string, how Source, now time.Time) (added []string, err error) {
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
		if t := r.releaseLocked(txn, s, n); t != "" {
			added = append(added, t)
		}
	}
	for _, n := range adds {
		if r.claimLocked(txn, s, n, how, now, &dl) {
			added = append(added, n)
		}
	}
	r.imu.Unlock()
	r.claims += len(adds) - len(removed)
	s.names = append(kept, adds...)
	s.extra = nil
	info := s.row.Info
	info.ListedAt, info.ListedHow, info.Verified = now, how, true
	r.putRow(txn, s, &info)
	dl.flush(r, s)
	return added, err
}

// AddName adds one claim (search-through reply or static configuration).
func (r *Registry) AddName(g pva.GUID, name string, how Source) error {
	return r.AddNames(g, []string{name}, how)
}

// AddNames adds claims to g's set, keeping the rest; names already claimed
// by g get how and now as their learned source.
func (r *Registry) AddNames(g pva.GUID, names []string, how Source) error {
	r.wmu.Lock()
	var added []string
	var err error
	defer func() { r.wmu.Unlock(); r.notify(added) }()
	s := r.byGUID[g]
	if s == nil {
		return ErrUnknownServer
	}
	now := r.clk.Now()
	txn := r.db.Txn(true)
	defer txn.Abort()
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
		if _, ok := s.extra[n]; ok || r.claimsLocked(txn, s, n) {
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
		if r.claimLocked(txn, s, n, how, now, &dl) {
			added = append(added, n)
		}
		r.claims++
		s.names = append(s.names, n)
		s.extra[n] = learned{how, now}
	}
	r.imu.Unlock()
	info := s.row.Info
	r.putRow(txn, s, &info)
	txn.Commit()
	dl.flush(r, s)
	return err
}

// claimsLocked reports whether s already claims n (held or duplicate).
func (r *Registry) claimsLocked(txn *memdb.Txn, s *server, n string) bool {
	if id, ok := r.idx.get(n); ok && id == s.id {
		return true
	}
	if r.dupNames[n] == 0 {
		return false
	}
	o, _ := txn.First(tabConflicts, "id", n, s.key)
	return o != nil
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
	for id := range d.other {
		h := r.byID[id]
		r.log.Warn("duplicate PV names: first claim kept",
			zap.Stringer("holder_guid", h.guid), zap.Stringer("holder", h.row.Info.Addr),
			zap.Stringer("claimant_guid", s.guid), zap.Stringer("claimant", s.row.Info.Addr),
			zap.Int("names", d.n), zap.Strings("examples", d.first))
	}
}

// claimLocked records s's claim on n (not yet claimed by s); imu and wmu
// held. It reports whether s became the holder.
func (r *Registry) claimLocked(txn *memdb.Txn, s *server, n string, how Source, now time.Time, dl *dupLog) bool {
	if id, ok := r.idx.get(n); ok {
		r.seq++
		row := &conflictRow{Name: n, Holder: r.byID[id].key, Claimant: s.key, Seq: r.seq, Since: now, How: how}
		if err := txn.Insert(tabConflicts, row); err != nil {
			panic(fmt.Sprintf("registry: insert conflict: %v", err))
		}
		r.dupNames[n]++
		r.st.dups.Add(1)
		dl.add(n, id)
		return false
	}
	r.idx.set(n, s.id)
	r.gen.Add(1)
	s.held++
	return true
}

// releaseLocked drops s's claim on n; imu and wmu held. If s held n and
// another server claims it, the earliest claimant takes over and n is
// returned (the name is answerable by a new server).
func (r *Registry) releaseLocked(txn *memdb.Txn, s *server, n string) string {
	id, ok := r.idx.get(n)
	if !ok || id != s.id {
		if r.dupNames[n] > 0 {
			if c, _ := txn.First(tabConflicts, "id", n, s.key); c != nil {
				_ = txn.Delete(tabConflicts, c)
				r.decDup(n)
			}
		}
		return ""
	}
	s.held--
	r.gen.Add(1)
	if r.dupNames[n] == 0 {
		r.idx.delete(n)
		return ""
	}
	it, _ := txn.Get(tabConflicts, "name", n)
	var rows []*conflictRow
	for o := it.Next(); o != nil; o = it.Next() {
		rows = append(rows, o.(*conflictRow))
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Seq < rows[j].Seq })
	next := rows[0]
	ns := r.byGUID[mustGUID(next.Claimant)]
	_ = txn.Delete(tabConflicts, next)
	r.decDup(n)
	r.idx.set(next.Name, ns.id) // the claimant's copy of the string, so s's can go
	ns.held++
	for _, c := range rows[1:] {
		cc := *c
		cc.Holder = ns.key
		_ = txn.Insert(tabConflicts, &cc)
	}
	if ns.row != nil {
		info := ns.row.Info
		r.putRow(txn, ns, &info)
	}
	r.st.takeovers.Add(1)
	r.log.Info("duplicate PV name taken over", zap.String("name", n),
		zap.Stringer("old_guid", s.guid), zap.Stringer("guid", ns.guid), zap.Stringer("endpoint", ns.row.Info.Addr))
	return n
}

func (r *Registry) decDup(n string) {
	if r.dupNames[n] <= 1 {
		delete(r.dupNames, n)
	} else {
		r.dupNames[n]--
	}
}

func mustGUID(k string) pva.GUID {
	g, err := pva.ParseGUID(k)
	if err != nil {
		panic(err)
	}
	return g
}

// RemoveServer removes g and every claim it made; names it held pass to
// their earliest other claimant.
func (r *Registry) RemoveServer(g pva.GUID) error {
	r.wmu.Lock()
	var added []string
	defer func() { r.wmu.Unlock(); r.notify(added) }()
	s := r.byGUID[g]
	if s == nil {
		return ErrUnknownServer
	}
	txn := r.db.Txn(true)
	defer txn.Abort()
	added = r.removeLocked(txn, s)
	txn.Commit()
	r.shrinkIndex()
	return nil
}

func (r *Registry) removeLocked(txn *memdb.Txn, s *server) (added []string) {
	r.imu.Lock()
	for _, n := range s.names {
		if t := r.releaseLocked(txn, s, n); t != "" {
			added = append(added, t)
		}
	}
	r.holders[s.id] = nil
	r.imu.Unlock()
	r.claims -= len(s.names)
	_ = txn.Delete(tabServers, s.row)
	delete(r.byGUID, s.guid)
	r.byID[s.id] = nil
	r.free = append(r.free, s.id)
	return added
}

// ExpireUnverified removes servers loaded from a snapshot and not confirmed
// within UnverifiedTTL of their load, as of now. It returns how many.
func (r *Registry) ExpireUnverified(now time.Time) int {
	r.wmu.Lock()
	var added []string
	defer func() { r.wmu.Unlock(); r.notify(added) }()
	txn := r.db.Txn(true)
	defer txn.Abort()
	n := 0
	for _, s := range r.byID {
		if s == nil || s.row.Info.Verified || now.Before(s.row.Info.LoadedAt.Add(r.opts.UnverifiedTTL)) {
			continue
		}
		r.log.Info("dropping unconfirmed server from snapshot", zap.Stringer("guid", s.guid),
			zap.Stringer("endpoint", s.row.Info.Addr), zap.Int("names", len(s.names)))
		added = append(added, r.removeLocked(txn, s)...)
		n++
	}
	txn.Commit()
	r.shrinkIndex()
	r.st.expired.Add(uint64(n))
	return n
}

// Server returns one server's row.
func (r *Registry) Server(g pva.GUID) (ServerInfo, bool) {
	o, _ := r.db.Txn(false).First(tabServers, "id", guidKey(g))
	if o == nil {
		return ServerInfo{}, false
	}
	return o.(*serverRow).Info, true
}

// Servers lists every server, ordered by GUID.
func (r *Registry) Servers() []ServerInfo {
	it, _ := r.db.Txn(false).Get(tabServers, "id")
	var out []ServerInfo
	for o := it.Next(); o != nil; o = it.Next() {
		out = append(out, o.(*serverRow).Info)
	}
	return out
}

// WatchServers returns a channel closed at the next change to the servers
// table (for the operator API).
func (r *Registry) WatchServers() <-chan struct{} {
	it, _ := r.db.Txn(false).Get(tabServers, "id")
	return it.WatchCh()
}

// WatchDuplicates returns a channel closed at the next change to the
// duplicate claims.
func (r *Registry) WatchDuplicates() <-chan struct{} {
	it, _ := r.db.Txn(false).Get(tabConflicts, "id")
	return it.WatchCh()
}

// Duplicates lists every duplicate claim with both endpoints, ordered by
// name then claim order.
func (r *Registry) Duplicates() []Duplicate {
	txn := r.db.Txn(false)
	it, _ := txn.Get(tabConflicts, "id")
	var rows []*conflictRow
	for o := it.Next(); o != nil; o = it.Next() {
		rows = append(rows, o.(*conflictRow))
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Name != rows[j].Name {
			return rows[i].Name < rows[j].Name
		}
		return rows[i].Seq < rows[j].Seq
	})
	out := make([]Duplicate, 0, len(rows))
	for _, c := range rows {
		d := Duplicate{Name: c.Name, Since: c.Since, ClaimantSource: c.How}
		if o, _ := txn.First(tabServers, "id", c.Holder); o != nil {
			d.Holder, d.HolderAddr = o.(*serverRow).Info.GUID, o.(*serverRow).Info.Addr
		}
		if o, _ := txn.First(tabServers, "id", c.Claimant); o != nil {
			d.Claimant, d.ClaimantAddr = o.(*serverRow).Info.GUID, o.(*serverRow).Info.Addr
		}
		out = append(out, d)
	}
	return out
}

// Names lists held names matching pattern, sorted, at most limit (0: no
// limit). A pattern with '*' or '?' is a glob ('*' any run, '?' one byte);
// otherwise it is a prefix ("" lists all). See NamesContext.
func (r *Registry) Names(pattern string, limit int) []NameInfo {
	out, _ := r.NamesContext(context.Background(), pattern, limit)
	return out
}

// namesScanChunk is the index slots copied per hold of imu (read): a writer
// waiting for imu — and the searches queued behind it — waits microseconds,
// however large the registry.
const namesScanChunk = 4096

// namesDetailChunk is the names whose details are read per hold of wmu.
const namesDetailChunk = 256

// NamesContext is Names for the operator API: it never holds a registry
// lock for more than one short chunk (the index is copied namesScanChunk
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
	isGlob := strings.ContainsAny(pattern, "*?")
	match := func(n string) bool {
		if isGlob {
			return globMatch(pattern, n)
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
		for _, n := range found[i:min(i+namesDetailChunk, len(found))] {
			id, ok := r.idx.get(n)
			if !ok {
				continue // released since the scan
			}
			s := r.byID[id]
			ni := NameInfo{Name: n, GUID: s.guid, Addr: s.row.Info.Addr, How: s.row.Info.ListedHow,
				At: s.row.Info.ListedAt, Claimant: r.dupNames[n]}
			if l, ok := s.extra[n]; ok {
				ni.How, ni.At = l.how, l.at
			}
			out = append(out, ni)
		}
		r.wmu.Unlock()
	}
	return out, nil
}

// globMatch matches '*' (any run) and '?' (one byte), iteratively.
func globMatch(p, s string) bool {
	px, sx, starP, starS := 0, 0, -1, 0
	for sx < len(s) {
		switch {
		case px < len(p) && (p[px] == '?' || p[px] == s[sx]):
			px++
			sx++
		case px < len(p) && p[px] == '*':
			starP, starS = px, sx
			px++
		case starP >= 0:
			starS++
			px, sx = starP+1, starS
		default:
			return false
		}
	}
	for px < len(p) && p[px] == '*' {
		px++
	}
	return px == len(p)
}

// ServerNames returns the names g claims (held or duplicate), sorted.
func (r *Registry) ServerNames(g pva.GUID) ([]string, bool) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	s := r.byGUID[g]
	if s == nil {
		return nil, false
	}
	out := append([]string(nil), s.names...)
	sort.Strings(out)
	return out, true
}

// Counts returns the registry's size.
func (r *Registry) Counts() Counts {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	c := Counts{Servers: len(r.byGUID), Names: r.idx.count, Claims: r.claims, DuplicateNames: len(r.dupNames)}
	for _, v := range r.dupNames {
		c.Duplicates += v
	}
	for _, s := range r.byGUID {
		if !s.row.Info.Verified {
			c.Unverified++
		}
	}
	return c
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
