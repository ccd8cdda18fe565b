package registry

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	memdb "github.com/hashicorp/go-memdb"
	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/clock"
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

	st counters // metrics.go
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

// Limits are the options a running registry can change (a configuration
// reload). Zero MaxServers, MaxNames or UnverifiedTTL keep the current one.
// Each field's tag names the setting it takes (config.Fill).
type Limits struct {
	MaxServers    int           `setting:"registry.max_servers"`
	MaxNames      int           `setting:"registry.max_names"`
	UnverifiedTTL time.Duration `setting:"snapshot.unverified_window"`
	FieldNames    bool
	MaxNameBytes  int // applied as given: 0 = no bound
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

// Close stops the unverified-expiry timer.
func (r *Registry) Close() {
	r.wmu.Lock()
	if r.expiry != nil {
		r.expiry.Stop()
	}
	r.wmu.Unlock()
}
