// Package beacon is the server tracker: it turns received beacons and
// discovery replies into "new", "changed", "sources changed" and "lost"
// events, one table entry per server endpoint.
//
// It owns the table (keyed, as PVXS keys it, by the server's TCP endpoint
// and protocol string), the expiry check, and the tracking limit that
// contains restart storms. It does not own sockets or datagram decoding
// (internal/udpsearch calls Observe), probing (internal/probe reacts to the
// events), or the registry.
//
// # Change detection
//
// As in PVXS (ContextImpl::onBeacon), a different GUID or a different header
// version at a known endpoint means the server restarted (EventChanged); a
// different sender address alone does not count. Unlike the PVXS client,
// which ignores it, the tracker also watches the beacon's change count: PVXS
// servers bump it when their set of Sources changes, which is exactly when a
// name server must list the server again (EventSourcesChanged). A discovery
// reply carries no change count, so it never moves the stored one.
//
// # Expiry
//
// An entry not refreshed for Options.Expiry (PVXS: 360 s, twice the 180 s
// slow beacon period; beacon.expiry), or stamped more than 15 s in the
// future (a stepped wall clock), is dropped with EventLost. The check runs
// every Options.CheckInterval. PVXS runs it every 180 s and also every 10 s
// from its channel-cache timer, and so does pvans by default
// (beacon.DefaultCheckInterval): a name
// server that keeps answering for a dead server costs every client a failed
// connect, and a 20 000-entry scan every 10 s is cheap. The check interval
// is the detection granularity: an entry is lost at the first check at or
// after LastSeen+Expiry, never before.
package beacon

import (
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/outbox"
	"github.com/pvans-project/pvans/internal/pva"
)

// FutureSlack is how far in the future a last-seen time may lie before the
// entry is dropped (PVXS tickBeaconClean).
const FutureSlack = 15 * time.Second

// Via says how a server was heard from.
type Via uint8

// Ways a server announces itself.
const (
	ViaBeacon    Via = iota // CMD_BEACON
	ViaDiscovery            // found=0 reply to a discovery ping
)

func (v Via) String() string {
	if v == ViaDiscovery {
		return "discovery"
	}
	return "beacon"
}

// EventKind is what happened to a server.
type EventKind uint8

// Event kinds.
const (
	EventNew            EventKind = iota // endpoint not tracked before
	EventChanged                         // new GUID or version at a tracked endpoint: a restart
	EventSourcesChanged                  // same GUID, change count moved
	EventLost                            // expired
	// EventEvicted: an entry nothing proved over TCP, dropped to make room
	// for a new endpoint while the table is full (Options.Proven).
	EventEvicted
)

func (k EventKind) String() string {
	switch k {
	case EventNew:
		return "new"
	case EventChanged:
		return "changed"
	case EventSourcesChanged:
		return "sources-changed"
	case EventLost:
		return "lost"
	case EventEvicted:
		return "evicted"
	}
	return "invalid"
}

// Event is one change in the table. For EventChanged OldGUID is the GUID it
// replaces; for EventLost the fields are those of the dropped entry.
type Event struct {
	Kind        EventKind
	GUID        pva.GUID
	OldGUID     pva.GUID
	Endpoint    netip.AddrPort
	Protocol    string
	Version     uint8
	ChangeCount uint16
	Via         Via
	At          time.Time
}

// Observation is one received beacon or discovery reply.
type Observation struct {
	GUID pva.GUID
	// Endpoint is the server's TCP endpoint; the caller has already
	// replaced a wildcard address by the datagram's source IP.
	Endpoint    netip.AddrPort
	Protocol    string
	Version     uint8 // header version byte
	ChangeCount uint16
	From        netip.AddrPort // datagram source
	Via         Via
}

// Entry is one tracked server.
type Entry struct {
	GUID      pva.GUID
	Endpoint  netip.AddrPort
	Protocol  string
	Version   uint8
	FirstSeen time.Time // when this GUID was first seen at this endpoint
	LastSeen  time.Time
	// ChangeCount is the last beacon's change count; HasChangeCount is
	// false until a beacon (not a discovery reply) has been seen.
	ChangeCount    uint16
	HasChangeCount bool
	ChangeMoves    uint64 // times the change count moved under this GUID
	Sender         netip.AddrPort
	Via            Via // how it was last heard from
	// PrevGUID is the GUID this one replaced at the endpoint (the
	// EventChanged's OldGUID); zero for an endpoint new to the table.
	PrevGUID pva.GUID
	// sender is the address the entry was first heard from: whose share
	// of the table it counts in (perSender) for as long as it is there.
	sender netip.Addr
}

// Options configure a Tracker. The timings are the daemon's settings
// (Apply); here a zero Expiry is no expiry, a zero CheckInterval no
// check and a zero Limit no bound.
type Options struct {
	Clock         clock.Clock
	Expiry        time.Duration
	CheckInterval time.Duration
	Limit         int
	// Proven reports whether an entry's server was proven over TCP (it is
	// listed or watched). At the limit, a new endpoint takes the place of
	// an entry that is not, so beacons alone, which anyone can forge,
	// cannot fill the table and hide a new server; a proven entry is never
	// evicted. Called under the tracker's lock: it must not call back into
	// the tracker. Nil: every entry counts as proven (no eviction).
	Proven func(Entry) bool
	// OnEvent receives every event, in order, outside the tracker's lock;
	// it may call back into the tracker. It should not block for long: the
	// caller of Observe (the UDP receiver) may be the one delivering.
	OnEvent func(Event)
	Logger  *zap.Logger
}

type key struct {
	ep    netip.AddrPort
	proto string
}

// Tracker is the server table. It is safe for concurrent use.
type Tracker struct {
	opt Options
	log *zap.Logger

	mu    sync.Mutex
	table map[key]*Entry
	// perSender counts entries by the address they were first heard from
	// (a relay's sightings count as the relay's), so an eviction takes from
	// the host with the most: a host's one server is never what a flood
	// of many endpoints from a few addresses pushes out.
	perSender  map[netip.Addr]int
	stats      counters // metrics.go
	timer      clock.Timer
	started    bool
	closed     bool
	events     outbox.Outbox[Event]
	warnedFull bool
}

// New returns a tracker; call Start to run the expiry check.
func New(opt Options) *Tracker {
	if opt.Clock == nil {
		opt.Clock = clock.Real{}
	}
	if opt.Logger == nil {
		opt.Logger = zap.NewNop()
	}
	return &Tracker{opt: opt, log: opt.Logger, table: make(map[key]*Entry), perSender: make(map[netip.Addr]int)}
}

// Observe records one beacon or discovery reply.
func (t *Tracker) Observe(o Observation) {
	now := t.opt.Clock.Now()
	t.mu.Lock()
	t.stats.observed.Add(1)
	k := key{o.Endpoint, o.Protocol}
	e := t.table[k]
	switch {
	case e == nil:
		if limit := t.opt.Limit; limit > 0 && len(t.table) >= limit && !t.evictLocked(now) {
			t.stats.dropped.Add(1)
			warn := !t.warnedFull
			t.warnedFull = true
			t.mu.Unlock()
			if warn {
				t.log.Warn("beacon tracking limit reached; ignoring new servers",
					zap.Int("limit", limit), zap.Stringer("endpoint", o.Endpoint))
			}
			return
		}
		e = &Entry{GUID: o.GUID, Endpoint: o.Endpoint, Protocol: o.Protocol, Version: o.Version,
			FirstSeen: now, LastSeen: now, Sender: o.From, Via: o.Via, sender: o.From.Addr().Unmap()}
		if o.Via == ViaBeacon {
			e.ChangeCount, e.HasChangeCount = o.ChangeCount, true
		}
		t.table[k] = e
		t.perSender[e.sender]++
		t.stats.new.Add(1)
		t.events.Push(t.event(EventNew, e, pva.GUID{}, now))
	case e.GUID != o.GUID || e.Version != o.Version:
		old, counted := e.GUID, e.sender
		*e = Entry{GUID: o.GUID, Endpoint: o.Endpoint, Protocol: o.Protocol, Version: o.Version,
			FirstSeen: now, LastSeen: now, Sender: o.From, Via: o.Via, PrevGUID: old, sender: counted}
		if o.Via == ViaBeacon {
			e.ChangeCount, e.HasChangeCount = o.ChangeCount, true
		}
		t.stats.changed.Add(1)
		t.events.Push(t.event(EventChanged, e, old, now))
	default:
		e.LastSeen, e.Sender, e.Via = now, o.From, o.Via
		if o.Via == ViaBeacon {
			moved := e.HasChangeCount && e.ChangeCount != o.ChangeCount
			e.ChangeCount, e.HasChangeCount = o.ChangeCount, true
			if moved {
				e.ChangeMoves++
				t.stats.sourcesChanged.Add(1)
				t.events.Push(t.event(EventSourcesChanged, e, pva.GUID{}, now))
			}
		}
	}
	t.mu.Unlock()
	t.deliver()
}

// evictSample is how many entries an eviction looks at, taken at random
// (map order) as caches sample, so a flood costs a few lookups per new
// endpoint, not a scan of the table.
const evictSample = 8

// drop removes an entry from the table.
func (t *Tracker) drop(k key) {
	a := t.table[k].sender
	delete(t.table, k)
	if t.perSender[a]--; t.perSender[a] <= 0 {
		delete(t.perSender, a)
	}
}

// evictLocked drops one unproven entry of a random sample, and reports
// whether it made room: the one whose sender has the most entries, of
// those the least recently seen. A flood of forged beacons then pushes
// out its own entries first, whether it names many ports of a few hosts
// or, through a (spoofed) trusted relay, many hosts; a real server heard
// from its own address goes only when every entry sampled is alone on its
// sender (a flood from as many source addresses as the table holds).
func (t *Tracker) evictLocked(now time.Time) bool {
	if t.opt.Proven == nil {
		return false
	}
	var victim *Entry
	vn, seen := 0, 0
	for _, e := range t.table {
		if seen++; seen > evictSample {
			break
		}
		n := t.perSender[e.sender]
		if victim != nil && (n < vn || (n == vn && !e.LastSeen.Before(victim.LastSeen))) {
			continue
		}
		if !t.opt.Proven(*e) {
			victim, vn = e, n
		}
	}
	if victim == nil {
		return false
	}
	t.drop(key{victim.Endpoint, victim.Protocol})
	t.stats.evicted.Add(1)
	t.events.Push(t.event(EventEvicted, victim, pva.GUID{}, now))
	return true
}

func (t *Tracker) event(k EventKind, e *Entry, old pva.GUID, now time.Time) Event {
	return Event{Kind: k, GUID: e.GUID, OldGUID: old, Endpoint: e.Endpoint, Protocol: e.Protocol,
		Version: e.Version, ChangeCount: e.ChangeCount, Via: e.Via, At: now}
}

// deliver hands queued events to OnEvent outside the lock, in table
// order; a call made from inside OnEvent queues its events for the running
// delivery.
func (t *Tracker) deliver() {
	t.events.Drain(&t.mu, func(ev Event) {
		t.logEvent(ev)
		if t.opt.OnEvent != nil {
			t.opt.OnEvent(ev)
		}
	})
}

func (t *Tracker) logEvent(ev Event) {
	if ce := t.log.Check(zap.DebugLevel, "server "+ev.Kind.String()); ce != nil {
		ce.Write(zap.Stringer("guid", ev.GUID), zap.Stringer("endpoint", ev.Endpoint),
			zap.String("protocol", ev.Protocol), zap.Uint16("change_count", ev.ChangeCount),
			zap.Stringer("via", ev.Via))
	}
}

// Servers returns a copy of every entry, in no particular order.
func (t *Tracker) Servers() []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Entry, 0, len(t.table))
	for _, e := range t.table {
		out = append(out, *e)
	}
	return out
}

// Lookup returns the entry for an endpoint and protocol.
func (t *Tracker) Lookup(endpoint netip.AddrPort, protocol string) (Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.table[key{endpoint, protocol}]; e != nil {
		return *e, true
	}
	return Entry{}, false
}

// Tracked is the number of entries now.
func (t *Tracker) Tracked() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.table)
}

// Start runs the expiry check every CheckInterval until Close.
func (t *Tracker) Start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.started = true
	t.armLocked()
}

// armLocked schedules the first check of a started tracker that has a
// check interval and none scheduled; t.mu held.
func (t *Tracker) armLocked() {
	if t.started && !t.closed && t.timer == nil && t.opt.CheckInterval > 0 {
		t.timer = t.opt.Clock.AfterFunc(t.opt.CheckInterval, t.tick)
	}
}

// Timings are the options a running tracker can change (a configuration
// reload); zero fields keep the current value. Each tag names the setting
// the field takes (config.Fill).
type Timings struct {
	Expiry        time.Duration `setting:"beacon.expiry"`
	CheckInterval time.Duration
	Limit         int `setting:"registry.max_servers"`
}

// Apply applies new timings: the expiry from the next check, the
// check interval from the check after it, the limit to the next new
// server (a lowered limit removes nothing: servers leave as they expire).
func (t *Tracker) Apply(tm Timings) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tm.Expiry > 0 {
		t.opt.Expiry = tm.Expiry
	}
	if tm.CheckInterval > 0 {
		t.opt.CheckInterval = tm.CheckInterval
		t.armLocked() // the first interval of a tracker started without one
	}
	if tm.Limit > 0 {
		t.opt.Limit = tm.Limit
		t.warnedFull = false
	}
}

// Close stops the expiry check. The table is kept (Servers still works).
func (t *Tracker) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.timer != nil {
		t.timer.Stop()
	}
}

func (t *Tracker) tick() {
	t.Expire()
	t.mu.Lock()
	if !t.closed {
		t.timer = t.opt.Clock.AfterFunc(t.opt.CheckInterval, t.tick)
	}
	t.mu.Unlock()
}

// Expire runs one expiry check now and returns how many entries it dropped.
func (t *Tracker) Expire() int {
	now := t.opt.Clock.Now()
	t.mu.Lock()
	n := 0
	for k, e := range t.table {
		age := now.Sub(e.LastSeen)
		if (t.opt.Expiry > 0 && age >= t.opt.Expiry) || age < -FutureSlack {
			t.drop(k)
			t.stats.lost.Add(1)
			t.events.Push(t.event(EventLost, e, pva.GUID{}, now))
			n++
		}
	}
	if n > 0 && (t.opt.Limit <= 0 || len(t.table) < t.opt.Limit) {
		t.warnedFull = false
	}
	t.mu.Unlock()
	t.deliver()
	return n
}
