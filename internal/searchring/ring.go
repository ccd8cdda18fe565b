package searchring

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/limitlog"
	"github.com/pvans-project/pvans/internal/pva"
)

// Constants of the PVXS search schedule (docs/protocol.md, "Constants").
const (
	// Buckets is the ring size; it bounds the retry interval at
	// Buckets × Tick.
	Buckets = 30
	// Tick drains one bucket.
	Tick = time.Second
	// FastTick is the tick during a hurry-up revolution (one revolution ≈ 6 s).
	FastTick = 200 * time.Millisecond
	// InitialDelay batches newly wanted names into shared datagrams.
	InitialDelay = 10 * time.Millisecond
	// CohortThreshold is the bucket imbalance that defers a Channel by one
	// extra tick.
	CohortThreshold = 100
	// PokeHoldoff rate-limits hurry-up, whatever its cause.
	PokeHoldoff = 30 * time.Second
	// UpstreamBacklogLimit skips a name server whose transmit queue already
	// holds more than this: a backlogged link is better retried on a later
	// revolution than buried deeper.
	UpstreamBacklogLimit = 64 * 1024
	// DefaultSweepDelay is the PVXS channel-cache sweep period.
	DefaultSweepDelay = 10 * time.Second
)

// Poke causes. Any string is accepted; these are the ones PVXS knows.
const (
	PokeBeacon     = "beacon"     // a new server seen by beacon
	PokeDiscovery  = "discovery"  // a new server seen by a discovery reply
	PokeNameServer = "nameserver" // an upstream name server (re)validated
	PokeOperator   = "operator"   // an operator asked (Context::hurryUp)
)

// Options configures a Ring. Transport is required; everything else has a
// default.
type Options struct {
	Clock     clock.Clock // clock.Real{} if nil
	Transport Transport
	// ReplyPort is the UDP port replies should come back to (the search
	// socket's port); TCP copies always carry 0.
	ReplyPort uint16
	// Protocols is the protocol list Want searches with, ["tcp"] by
	// default. A reply is accepted only for a protocol listed here ("tcp"
	// or "tls"): a "tls" endpoint is useless to a peer that did not ask for
	// TLS. WantTLS always searches with TLSProtocols.
	Protocols []string
	// IgnoreGUIDs are servers whose replies are discarded.
	IgnoreGUIDs []pva.GUID
	// Resolved is called, without any ring lock held, when the first
	// positive reply for a name wanted by Want arrives.
	Resolved func(name string, guid pva.GUID, ep netip.AddrPort)
	// ResolvedTLS is Resolved for a name wanted by WantTLS; overTLS says
	// whether the reply named a TLS endpoint (protocol "tls") or a plain
	// one ("tcp": a server without TLS).
	ResolvedTLS func(name string, guid pva.GUID, ep netip.AddrPort, overTLS bool)
	// Duplicate is called, without any ring lock held, when a server with a
	// different GUID claims a name already resolved by first.
	Duplicate func(name string, first, second pva.GUID)
	Logger    *zap.Logger
	// SweepDelay is the period of the sweep that discards dropped Channels.
	// Zero means DefaultSweepDelay; negative means discard at Drop.
	SweepDelay time.Duration
	// MaxChannels bounds the distinct names remembered (searching, or
	// resolved or dropped and not yet swept); a name wanted beyond it is
	// not searched through (counted ChannelsRefused). 0 = no bound.
	MaxChannels int
	// DatagramsPerSecond bounds the search datagrams sent (each to every
	// destination), with a burst of as many; a datagram over the budget is
	// not sent (counted DatagramsLimited) and its names come round again on
	// their next bucket. 0 = no bound.
	DatagramsPerSecond float64
	// SweepPasses is how many sweeps a dropped Channel must survive
	// unreferenced before it is discarded. The default, 1, is PVXS as built
	// (docs/protocol.md, "The channel cache sweep": searching stops
	// 0–10 s after the last waiter goes); 2 is the intended two-sweep
	// behaviour (10–20 s).
	SweepPasses int
}

// Reason says why a resolved name re-enters search
// (docs/protocol.md, "Re-entry into search"); it picks where in the ring
// the Channel lands.
type Reason int

const (
	// ReenterLost: the channel was closed or its TCP connection lost while
	// active. Searched at the next tick.
	ReenterLost Reason = iota
	// ReenterConnectFailed: transport failure before the channel was
	// created. Searched in ~10 s.
	ReenterConnectFailed
	// ReenterRefused: the server claimed the name and then refused
	// CMD_CREATE_CHANNEL. Searched last (~30 s), which breaks a tight
	// search/create/refuse loop.
	ReenterRefused
)

func (r Reason) offset() int {
	switch r {
	case ReenterConnectFailed:
		return 10
	case ReenterRefused:
		return Buckets - 1
	default:
		return 0
	}
}

func (r Reason) String() string {
	switch r {
	case ReenterLost:
		return "lost"
	case ReenterConnectFailed:
		return "connect-failed"
	case ReenterRefused:
		return "create-refused"
	}
	return "unknown"
}

type chanState uint8

const (
	stSearching chanState = iota
	stResolved
	stGone
)

// bucket positions of a Channel's live ring entry.
const (
	inInitial = -1
	inNone    = -2
)

// TLSProtocols is the protocol list of the searches WantTLS makes, as a
// PVXS client with a keychain sends it (client.cpp): a Secure PVAccess
// server answers it with "tls" and its TLS port, any other with "tcp".
var TLSProtocols = []string{"tls", "tcp"}

// chanKey names a Channel: the same name wanted by plain clients and by
// TLS clients is two searches, because one protocol list cannot get both
// a Secure PVAccess server's TLS endpoint and its plain one.
type chanKey struct {
	name string
	tls  bool
}

// channel is one distinct name being (or recently) searched, for plain
// clients or (tls) for TLS clients.
type channel struct {
	name     string
	tls      bool
	nameB    []byte // what the packer writes
	cid      uint32
	state    chanState
	attempts int // nSearch: 0..Buckets
	// epoch changes whenever the Channel leaves the ring; a ring entry
	// whose epoch differs is a stale (weak) reference, dropped as its
	// bucket drains. It also keeps a re-entered Channel from being
	// searched twice per revolution through an old entry.
	epoch      uint32
	bucket     int // 0..Buckets-1, inInitial or inNone
	referenced bool
	sweeps     int
	guid       pva.GUID
	ep         netip.AddrPort
	// seqs are the sequence IDs of the last datagrams that carried this
	// Channel: a reply must echo one of them (with the CID) to count.
	seqs  [seqsKept]uint32
	nseqs uint8
}

// seqsKept is how many recent searches of a Channel a reply may answer:
// a reply normally comes within milliseconds of its search, and searches
// of one Channel are at least a second apart.
const seqsKept = 4

func (ch *channel) sentWith(seq uint32) {
	ch.seqs[int(ch.nseqs)%seqsKept] = seq
	ch.nseqs++
}

func (ch *channel) searchedWith(seq uint32) bool {
	for i := 0; i < min(int(ch.nseqs), seqsKept); i++ {
		if ch.seqs[i] == seq {
			return true
		}
	}
	return false
}

type entry struct {
	ch    *channel
	epoch uint32
}

func (e entry) live() bool { return e.ch.state == stSearching && e.ch.epoch == e.epoch }

// Ring is the search ring. Safe for concurrent use.
type Ring struct {
	clk       clock.Clock
	tr        Transport
	log       *zap.Logger
	resolved  func(string, pva.GUID, netip.AddrPort)
	resolvedT func(string, pva.GUID, netip.AddrPort, bool)
	duplicate func(string, pva.GUID, pva.GUID)
	ignore    map[pva.GUID]struct{}
	protoTCP  bool
	protoTLS  bool
	sweepGap  time.Duration
	passes    int
	maxCh     int
	ll        *limitlog.Log

	// rate and tokens are the datagram budget (token bucket), under sendMu.
	rate     float64
	tokens   float64
	tokensAt time.Time

	// sendMu serialises packing and sending (and owns the packers and
	// name lists); it is taken before mu, so Want/Drop/OnReply never wait
	// on a send. packer and names are Want's channels, packerTLS and
	// namesTLS WantTLS's.
	sendMu    sync.Mutex
	packer    *pva.SearchPacker
	names     []pva.SearchName
	packerTLS *pva.SearchPacker
	namesTLS  []pva.SearchName

	// dests counts, per destination, what sendLocked did (destinations.go).
	dests destinations
	// udpSent is r.dests.udpSent as a func value made once, so a send
	// allocates no closure.
	udpSent func(netip.AddrPort, error)

	mu     sync.Mutex
	closed bool
	byName map[chanKey]*channel
	byCID  map[uint32]*channel
	// rnd draws CIDs and the first sequence ID: an off-path sender must
	// guess both to have a forged reply matched (crypto-seeded).
	rnd        *rand.Rand
	nextSeq    uint32 // sequence ID of the next tick's datagrams
	sendSeq    uint32 // sequence ID of the datagrams being sent
	buckets    [Buckets][]entry
	live       [Buckets]int
	spare      []entry
	initial    []entry
	initSpare  []entry
	nInitial   int
	cursor     int
	tickTimer  clock.Timer
	tickGen    uint64
	initTimer  clock.Timer
	nPoked     int
	lastPoke   time.Time
	everPoked  bool
	dropped    map[*channel]struct{}
	sweepTimer clock.Timer
	searching  int
	claims     claims

	ctr counters
}

// ErrNoTransport is returned by New without a Transport.
var ErrNoTransport = errors.New("searchring: Options.Transport is required")

// New starts a ring: its 1 s tick runs until Close.
func New(o Options) (*Ring, error) {
	if o.Transport == nil {
		return nil, ErrNoTransport
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if len(o.Protocols) == 0 {
		o.Protocols = []string{"tcp"}
	}
	if o.SweepDelay == 0 {
		o.SweepDelay = DefaultSweepDelay
	}
	if o.SweepPasses <= 0 {
		o.SweepPasses = 1
	}
	r := &Ring{
		clk:       o.Clock,
		tr:        o.Transport,
		log:       o.Logger,
		resolved:  o.Resolved,
		resolvedT: o.ResolvedTLS,
		duplicate: o.Duplicate,
		ignore:    make(map[pva.GUID]struct{}, len(o.IgnoreGUIDs)),
		sweepGap:  o.SweepDelay,
		passes:    o.SweepPasses,
		byName:    make(map[chanKey]*channel),
		byCID:     make(map[uint32]*channel),
		dropped:   make(map[*channel]struct{}),
		maxCh:     o.MaxChannels,
		ll:        limitlog.New(o.Logger, 0, o.Clock),
		rate:      o.DatagramsPerSecond,
		tokens:    o.DatagramsPerSecond,
		tokensAt:  o.Clock.Now(),
	}
	r.udpSent = r.dests.udpSent
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	r.rnd = rand.New(rand.NewChaCha8(seed))
	r.nextSeq = binary.BigEndian.Uint32(seed[:4]) ^ r.rnd.Uint32()
	for _, g := range o.IgnoreGUIDs {
		r.ignore[g] = struct{}{}
	}
	for _, p := range o.Protocols {
		switch p {
		case "tcp":
			r.protoTCP = true
		case "tls":
			r.protoTLS = true
		default:
			return nil, errors.New("searchring: unsupported protocol " + p + " (want tcp or tls)")
		}
	}
	r.packer = pva.NewSearchPacker(o.ReplyPort)
	r.packer.Protocols = append([]string(nil), o.Protocols...)
	r.packerTLS = pva.NewSearchPacker(o.ReplyPort)
	r.packerTLS.Protocols = TLSProtocols
	r.mu.Lock()
	r.armTickLocked(Tick)
	r.mu.Unlock()
	return r, nil
}

// SetReplyPort sets the UDP port replies should come back to, for an
// owner that builds the ring before it opens the socket that port belongs
// to. It takes effect from the next datagram.
func (r *Ring) SetReplyPort(port uint16) {
	r.sendMu.Lock()
	r.packer.ReplyPort = port
	r.packerTLS.ReplyPort = port
	r.sendMu.Unlock()
}

// Close stops every timer. Later calls do nothing.
func (r *Ring) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	r.tickGen++
	for _, t := range []clock.Timer{r.tickTimer, r.initTimer, r.sweepTimer} {
		if t != nil {
			t.Stop()
		}
	}
}

// Want starts searching for name (the first waiter appeared). Wanting a
// name already searched, or dropped but not yet swept, only marks it
// referenced again: the search keeps its place and attempt count. Wanting a
// name that resolved earlier and is still remembered restarts its search
// as new, since the caller no longer knows where it lives.
func (r *Ring) Want(name string) { r.want(chanKey{name, false}) }

// WantTLS is Want for TLS clients: the name is searched with TLSProtocols,
// in a Channel of its own (a name wanted by both kinds of client is
// searched twice), and its answer goes to ResolvedTLS, "tls" or "tcp".
func (r *Ring) WantTLS(name string) { r.want(chanKey{name, true}) }

func (r *Ring) want(k chanKey) {
	name := k.name
	protos := r.packer.Protocols
	if k.tls {
		protos = r.packerTLS.Protocols
	}
	if pva.SearchOverhead(protos)+pva.SearchNameCost(len(name)) > pva.MaxSearchBuffer {
		r.log.Error("PV name too long to search", zap.Int("bytes", len(name)))
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	ch := r.byName[k]
	if ch == nil && r.maxCh > 0 && len(r.byName) >= r.maxCh {
		r.ctr.refused.Add(1)
		r.ll.Hit("searchring_channels", "search-through name limit reached; name not searched through",
			zap.Int("max_names", r.maxCh))
		return
	}
	if ch == nil {
		ch = &channel{name: name, tls: k.tls, nameB: []byte(name), cid: r.allocCIDLocked(), bucket: inNone}
		r.byName[k] = ch
		r.byCID[ch.cid] = ch
		r.searching++
		r.queueInitialLocked(ch)
	} else if ch.state == stResolved {
		ch.state = stSearching
		ch.attempts = 0
		ch.guid = pva.GUID{}
		ch.ep = netip.AddrPort{}
		r.searching++
		r.queueInitialLocked(ch)
	}
	ch.referenced = true
	if _, ok := r.dropped[ch]; ok {
		delete(r.dropped, ch)
		ch.sweeps = 0
	}
}

// Drop says the last waiter for name is gone. The Channel keeps searching
// until the sweep discards it (see Options.SweepDelay), as a PVXS client's
// channel cache does.
func (r *Ring) Drop(name string) { r.drop(chanKey{name, false}) }

// DropTLS is Drop for a name wanted by WantTLS.
func (r *Ring) DropTLS(name string) { r.drop(chanKey{name, true}) }

func (r *Ring) drop(k chanKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := r.byName[k]
	if r.closed || ch == nil || !ch.referenced {
		return
	}
	ch.referenced = false
	if r.sweepGap < 0 {
		r.removeLocked(ch)
		return
	}
	ch.sweeps = 0
	r.dropped[ch] = struct{}{}
	if r.sweepTimer == nil {
		r.sweepTimer = r.clk.AfterFunc(r.sweepGap, r.sweep)
	}
}

// sweep discards Channels that stayed unreferenced for enough sweeps; it
// re-arms itself only while dropped Channels remain, so an idle ring has
// no sweep timer.
func (r *Ring) sweep() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweepTimer = nil
	if r.closed {
		return
	}
	for ch := range r.dropped {
		ch.sweeps++
		if ch.sweeps >= r.passes {
			r.removeLocked(ch)
		}
	}
	if len(r.dropped) > 0 {
		r.sweepTimer = r.clk.AfterFunc(r.sweepGap, r.sweep)
	}
}

// removeLocked forgets a Channel: its CID is free, its ring entries stale.
func (r *Ring) removeLocked(ch *channel) {
	delete(r.dropped, ch)
	delete(r.byName, chanKey{ch.name, ch.tls})
	delete(r.byCID, ch.cid)
	if ch.state == stSearching {
		r.searching--
		r.leaveRingLocked(ch)
	}
	ch.state = stGone
	r.ctr.swept.Add(1)
}

// leaveRingLocked turns the Channel's ring entry into a weak reference that
// the bucket drops when drained.
func (r *Ring) leaveRingLocked(ch *channel) {
	switch {
	case ch.bucket >= 0:
		r.live[ch.bucket]--
	case ch.bucket == inInitial:
		r.nInitial--
	}
	ch.bucket = inNone
	ch.epoch++
}

// allocCIDLocked draws an unused, random, non-zero CID: CIDs counted up
// from 1 would let anyone who sees no search at all forge a matching reply.
// Its top bit is clear: Phoebus core-pva's server reads a CID as a signed
// int and takes a negative one for a "list servers" ping, which it answers
// with no claim (PVAServer.handleSearchRequest), and a name keeps its CID
// on every retry; 31 random bits still leave a forger one chance in 2³¹.
func (r *Ring) allocCIDLocked() uint32 {
	for {
		cid := r.rnd.Uint32() >> 1
		if _, used := r.byCID[cid]; !used && cid != 0 {
			return cid
		}
	}
}

func (r *Ring) queueInitialLocked(ch *channel) {
	ch.epoch++ // any older ring entry is now stale
	ch.bucket = inInitial
	r.nInitial++
	r.initial = append(r.initial, entry{ch, ch.epoch})
	if r.initTimer == nil {
		r.initTimer = r.clk.AfterFunc(InitialDelay, r.initialTick)
	}
}

func (r *Ring) armTickLocked(d time.Duration) {
	r.tickGen++
	gen := r.tickGen
	r.tickTimer = r.clk.AfterFunc(d, func() { r.tick(gen) })
}

// Poke hurries the search up (docs/protocol.md, "Hurry-up"; PVXS
// src/client.cpp ContextImpl::poke): unless a fast revolution is running or
// the last accepted poke was less than PokeHoldoff ago, whatever its cause,
// the next tick fires at once and the Buckets ticks from it run at FastTick
// without advancing attempt counts, so every unresolved name is searched
// once in ~6 s. It reports whether the poke was accepted.
func (r *Ring) Poke(cause string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	now := r.clk.Now()
	if r.nPoked > 0 || (r.everPoked && now.Sub(r.lastPoke) < PokeHoldoff) {
		r.ctr.pokesIgnored.Add(1)
		r.log.Debug("hurry-up ignored", zap.String("cause", cause),
			zap.Bool("fast_revolution", r.nPoked > 0), zap.Duration("since_last", now.Sub(r.lastPoke)))
		return false
	}
	r.everPoked = true
	r.lastPoke = now
	r.nPoked = Buckets
	r.ctr.pokes.Add(1)
	r.log.Debug("hurry-up", zap.String("cause", cause))
	if r.tickTimer != nil {
		r.tickTimer.Stop()
	}
	r.armTickLocked(0)
	return true
}

// tick drains the bucket under the cursor. gen guards against a tick whose
// timer was replaced by Poke but had already started firing.
func (r *Ring) tick(gen uint64) {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	r.mu.Lock()
	if r.closed || gen != r.tickGen {
		r.mu.Unlock()
		return
	}
	poked := false
	if r.nPoked > 0 {
		poked = true
		r.nPoked--
	}
	idx := r.cursor
	r.cursor = (r.cursor + 1) % Buckets
	drained := r.buckets[idx]
	r.buckets[idx] = r.spare[:0]
	r.live[idx] = 0
	r.spare = r.drainLocked(drained, idx, !poked)
	if poked {
		r.armTickLocked(FastTick)
	} else {
		r.armTickLocked(Tick)
	}
	r.mu.Unlock()
	r.sendLocked()
}

// initialTick searches every name wanted in the last InitialDelay in shared
// datagrams, then parks them in the bucket under the cursor: their second
// search is at the next tick, 0–1 s later.
func (r *Ring) initialTick() {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	r.mu.Lock()
	r.initTimer = nil
	if r.closed {
		r.mu.Unlock()
		return
	}
	drained := r.initial
	r.initial = r.initSpare[:0]
	r.nInitial = 0
	r.initSpare = r.drainLocked(drained, r.cursor, false)
	r.mu.Unlock()
	r.sendLocked()
}

// drainLocked appends the live entries of drained to r.names and reinserts
// each Channel idx+n buckets ahead (n = attempt count, advanced when count
// is true, clamped to the ring), deferring it one more bucket when the
// target holds more than CohortThreshold entries more than the bucket after
// it — bucket sizes including stale entries, as PVXS's list sizes do. It
// returns drained emptied, for reuse.
func (r *Ring) drainLocked(drained []entry, idx int, count bool) []entry {
	names, namesTLS := r.names[:0], r.namesTLS[:0]
	r.sendSeq = r.nextSeq
	r.nextSeq++
	for _, e := range drained {
		if !e.live() {
			continue
		}
		ch := e.ch
		ch.sentWith(r.sendSeq)
		if ch.tls {
			namesTLS = append(namesTLS, pva.SearchName{CID: ch.cid, Name: ch.nameB})
		} else {
			names = append(names, pva.SearchName{CID: ch.cid, Name: ch.nameB})
		}
		n := 0
		if count {
			ch.attempts = min(Buckets, ch.attempts+1)
			n = ch.attempts
		}
		// At saturation (n = Buckets) the target is the bucket being
		// refilled and the one after it drains at the very next tick, so a
		// deferred Channel is searched again 1 s later, not 31 s: that is
		// how PVXS bleeds an oversized cohort forward, reproduced as built.
		next := (idx + n) % Buckets
		after := (next + 1) % Buckets
		if a, b := len(r.buckets[next]), len(r.buckets[after]); a > b && a-b > CohortThreshold {
			next = after
		}
		r.buckets[next] = append(r.buckets[next], e)
		r.live[next]++
		ch.bucket = next
	}
	r.names, r.namesTLS = names, namesTLS
	clear(drained)
	return drained[:0]
}

// spendLocked takes one datagram from the budget; sendMu held.
func (r *Ring) spendLocked() bool {
	if r.rate <= 0 {
		return true
	}
	now := r.clk.Now()
	r.tokens = min(r.rate, r.tokens+now.Sub(r.tokensAt).Seconds()*r.rate)
	r.tokensAt = now
	if r.tokens < 1 {
		return false
	}
	r.tokens--
	return true
}

// sendLocked packs r.names, then r.namesTLS, into datagrams and hands
// each to every UDP destination and every ready, unbacklogged upstream.
// Called with sendMu held and mu released.
func (r *Ring) sendLocked() {
	r.names = r.sendNamesLocked(r.packer, r.names)
	r.namesTLS = r.sendNamesLocked(r.packerTLS, r.namesTLS)
}

// sendNamesLocked sends names with packer; it returns names emptied.
func (r *Ring) sendNamesLocked(packer *pva.SearchPacker, names []pva.SearchName) []pva.SearchName {
	if len(names) == 0 {
		return names
	}
	ups := r.tr.Upstreams()
	packer.Seq = r.sendSeq
	r.ctr.namesSearched.Add(uint64(len(names)))
	err := packer.Pack(names, func(d []byte) {
		if !r.spendLocked() {
			r.ctr.limited.Add(1)
			r.ll.Hit("searchring_datagrams", "search-through datagram rate limit reached; datagram not sent",
				zap.Float64("datagrams_per_second", r.rate))
			return
		}
		r.ctr.datagrams.Add(1)
		r.tr.SendUDP(d, r.udpSent)
		if len(ups) == 0 {
			return
		}
		// The packer rewrites the whole fixed part for its next datagram,
		// so editing this one in place for TCP is safe
		// (docs/protocol.md, "Name servers in PVXS clients": TCP searches
		// are always "unicast" and replies come back on the connection, so
		// the reply port means nothing there).
		d[pva.HeaderSize+pva.SearchOffFlags] |= pva.SearchUnicast
		d[pva.HeaderSize+pva.SearchOffReplyPort] = 0
		d[pva.HeaderSize+pva.SearchOffReplyPort+1] = 0
		for _, u := range ups {
			if !u.Ready() {
				continue
			}
			if u.Backlog() > UpstreamBacklogLimit {
				r.ctr.upstreamSkipped.Add(1)
				r.dests.upstream(u.Addr(), false)
				continue
			}
			u.Send(d)
			r.ctr.upstreamSent.Add(1)
			r.dests.upstream(u.Addr(), true)
		}
	})
	if err != nil {
		// Want refuses such names, so this is a bug, not an input problem.
		r.log.Error("search packing failed", zap.Error(err))
	}
	clear(names)
	return names[:0]
}
