// Package resolver is the one place every search path asks "who serves
// these names?". It answers batches of (CID, name) from the registry in one
// read, grouped per server (one CMD_SEARCH_RESPONSE carries one GUID and one
// endpoint); remembers the names a TCP client is still waiting for, per
// (connection, CID), and pushes the answer the moment the registry learns
// one; and hands unresolved names to a search-through Searcher, one search
// per distinct name however many clients wait for it.
//
// It does not own sockets or encode replies (tcpsearch, udpsearch do), nor
// the names themselves (internal/registry).
//
// Waiters are keyed by connection and CID, never by CID alone: every PVXS
// client numbers its Channels from 0x12345678. A waiter expires WaitTTL after
// the client's last search for it (each retry refreshes it), so a client
// that stopped caring costs nothing for long.
//
// A client that reaches pvans only over UDP waits too (WaitUDP), keyed by
// its reply socket, so the names it searches and nobody listed are
// searched through on its behalf: a server that never beacons and lists
// nothing is found for it as for a TCP client. A UDP search's source and
// reply address are the sender's word, so its waiters are counted apart
// from the TCP clients' (per reply address and in all, MaxUDPWaiters):
// a spoofed flood cannot take the TCP clients' room, nor make pvans
// search through more names than one TCP source may.
package resolver

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/addrmap"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/limitlog"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

// Endpoint identifies the data server that claims names.
type Endpoint struct {
	GUID pva.GUID
	// TLSPort is the port of the server's TLS endpoint, at Addr's address
	// (0: none known).
	TLSPort  uint16
	Addr     netip.AddrPort
	Protocol string // "tcp"; "tls" for a server known to serve TLS only
}

// For is the endpoint to name to a client whose search listed "tls"
// (tls) or did not: a TLS client gets the server's TLS endpoint with
// protocol "tls" when it has one — never the plain one instead — and a
// plain client the plain endpoint. ok is false when the server has nothing
// for that client: a TLS-only server (Protocol "tls") and a plain client.
// The answer then goes through Wire like any other.
func (e Endpoint) For(tls bool) (ep Endpoint, ok bool) {
	if tls && e.TLSPort != 0 {
		e.Addr, e.Protocol = netip.AddrPortFrom(e.Addr.Addr(), e.TLSPort), "tls"
		return e, true
	}
	return e, tls || e.Protocol != "tls"
}

// Wire is the one rule for the server address and port to put in a
// CMD_SEARCH_RESPONSE naming e to the client at address client (TCP
// answers, UDP answers and pushed answers alike).
//
// First the address map (m, from map.rules): a server behind NAT or in a
// container is named by the endpoint that client can reach. Then: a server
// on pvans's own host that announced itself over loopback is known as
// 127.0.0.1, which means nothing to a client elsewhere: such a client is
// sent "any" instead, which a PVXS client reads as the address it reached
// pvans on (the TCP peer, or the UDP reply's source) — this host — keeping
// the real port (docs/protocol.md, "CMD_SEARCH_RESPONSE" and "Name
// servers in PVXS clients").
func (e Endpoint) Wire(client netip.Addr, m addrmap.Map) (pva.Address, uint16) {
	ap, _ := m.Apply(e.Addr, client)
	ip := ap.Addr().Unmap()
	if ip.IsLoopback() && !client.Unmap().IsLoopback() {
		return pva.AnyIPv4, ap.Port()
	}
	return pva.AddressFrom(ip), ap.Port()
}

// Offer is the protocols a search takes a claim in: the "tcp" and "tls"
// of its protocol list (answer.Listed), and "tcp" for every search over
// TCP. A waiter and a remembered answer keep the whole offer, so that a
// push or a re-answer names what the direct answer would have: a search
// listing "tls" alone is never named a plain server, one listing both
// is.
type Offer uint8

const (
	OfferTCP Offer = 1 << iota // plain PVAccess over TCP
	OfferTLS                   // Secure PVAccess
)

// TLS is whether o takes "tls": such a search is named a server's TLS
// endpoint when it has one (Endpoint.For), and searched through as TLS
// clients search (Searcher).
func (o Offer) TLS() bool { return o&OfferTLS != 0 }

// Group is the claims of one server: the body of one CMD_SEARCH_RESPONSE.
type Group struct {
	Server Endpoint
	CIDs   []uint32
	// Offer, in a pushed Group, is the offer of the search that made its
	// waiters wait (or that was told the answer re-answered): the push
	// answers as that search would have been. Lookup leaves it 0; its
	// caller knows its own search.
	Offer Offer
}

// Batch is the result of Lookup. It is reusable: Lookup resets it and keeps
// its slices, so steady-state lookups do not allocate. Groups and their CIDs
// are valid until the next Lookup into the same Batch.
type Batch struct {
	Groups []Group
	// Missing holds the indexes (into the query) of names nobody claims.
	Missing []int

	holders []*registry.Holder
	ghold   []*registry.Holder // holder of Groups[i]
	// gq[i][j] is the index in the query of Groups[i].CIDs[j] (what
	// ToldUDP and Client.Told remember the name by).
	gq [][]int32
}

// Searcher searches the server networks for names (search-through). Want
// is called once when the first client starts waiting for a name, Drop once
// when the last one stops (answered, expired, closed), separately for
// clients whose search listed "tls" (tls) and for the others: the search
// through must list the protocols its waiters listed. Both are called with
// the resolver's lock held: they must not block and must not call back
// into the resolver or the registry synchronously (enqueue instead).
type Searcher interface {
	Want(name string, tls bool)
	Drop(name string, tls bool)
}

// Options configure a Resolver; zero values take the defaults.
type Options struct {
	// WaitTTL is how long a waiter lives after the client's last search
	// for it; default 90s (PVXS retries at least every 30s).
	WaitTTL time.Duration
	// MaxWaitsPerClient bounds one connection's waiters; 0 = no bound
	// beyond MaxWaitsPerSource and MaxWaiters.
	MaxWaitsPerClient int
	// MaxWaitsPerSource bounds the waiters of all connections from one
	// source address (NewClientFrom); 0 = no bound beyond MaxWaiters.
	MaxWaitsPerSource int
	// MaxWaiters bounds the waiters of every connection together; 0 = no
	// bound. Waiters beyond any bound are dropped and counted: the client's
	// own retries still find the name, only the push is lost.
	MaxWaiters int
	// MaxNameBytes: a longer name is neither answered, waited for nor
	// searched through (counted NamesTooLong); 0 = no bound.
	MaxNameBytes int
	// NameAllowed is the name access policy (allow/deny lists). A name it
	// refuses is treated as held by nobody and never waited for: not
	// claimed, not pushed, never handed to the Searcher. It is called on
	// every looked-up name, so it must not allocate or keep name; nil (no
	// rules) costs one nil check.
	NameAllowed func(name []byte) bool
	// PushUDP answers the UDP searcher whose reply socket is to when a
	// name it waits for (WaitUDP) resolves, like push for a TCP client;
	// the same rules (resolver lock held, must not block) apply. nil: its
	// next search finds the name instead.
	PushUDP func(to netip.AddrPort, g Group)
	Clock   clock.Clock
	Logger  *zap.Logger
}

// UDPShare is the part of MaxWaiters the UDP searchers may hold together
// (MaxUDPWaiters): 100,000 / 10 = 10,000 at defaults, as many names as
// one TCP source may have searched through (resolver.DefaultMaxWaitsPerSource) and
// the search ring holds (searchring.DefaultMaxChannels). Their source is the
// sender's word, so a spoofed flood meets this bound, not the per-source
// one; a share apart keeps the TCP clients' room whatever it does.
const UDPShare = 10

// UDPNameShare: the distinct names UDP searchers' waiters make searched
// through are at most MaxUDPWaiters / UDPNameShare (5,000 at defaults).
// Their share of waiters equals the search ring's own bound at defaults
// (searchring.DefaultMaxChannels, 10,000), so without it a spoofed flood of
// distinct names filled the ring and no TCP client's name was searched
// through while the flood lasted; half is left to the TCP clients. A
// name a TCP client waits for is searched for it whoever waits too.
const UDPNameShare = 2

// Stats are the resolver's gauges (its counters are in metrics.go).
type Stats struct {
	Waiting   int64 // current waiters
	WaitNames int64 // distinct names waited for, plain and TLS counted apart
	// WaitingUDP: current waiters of UDP searchers (within Waiting).
	WaitingUDP int64
	Told       int // answers remembered for the restart fan-out (told.go)
}

// Policy is the part of the Options a running resolver can change (a
// configuration reload). One batch or Wait uses one Policy throughout: the
// old one or the new one, never a mix. Each tag names the setting the
// field takes (config.Fill).
type Policy struct {
	MaxWaitsPerClient int
	MaxWaitsPerSource int
	MaxWaiters        int `setting:"tcp.waiters_total"`
	MaxNameBytes      int
	NameAllowed       func(name []byte) bool
}

// refusal is why a Policy answers no search for a name.
type refusal uint8

const (
	answered refusal = iota
	tooLong          // over MaxNameBytes
	denied           // NameAllowed refuses it
)

// refuses is the name rule every search meets before its lookup, its
// wait and the API's view alike (Lookup, Wait, Answers); it counts and
// logs nothing, its callers do.
func (p *Policy) refuses(name []byte) refusal {
	if p.MaxNameBytes > 0 && len(name) > p.MaxNameBytes {
		return tooLong
	}
	if p.NameAllowed != nil && !p.NameAllowed(name) {
		return denied
	}
	return answered
}

func (o *Options) policy() Policy {
	return Policy{MaxWaitsPerClient: o.MaxWaitsPerClient, MaxWaitsPerSource: o.MaxWaitsPerSource,
		MaxWaiters: o.MaxWaiters, MaxNameBytes: o.MaxNameBytes, NameAllowed: o.NameAllowed}
}

// Apply applies a new policy to the next lookups and waits. Lowered
// waiter bounds remove no waiter: they refuse new ones until waiters leave
// the natural way (answered, expired, connection closed). A name the new
// name policy refuses is no longer answered; its existing waiters expire.
func (r *Resolver) Apply(p Policy) {
	r.pol.Store(&p)
}

// Resolver is safe for concurrent use.
type Resolver struct {
	reg  *registry.Registry
	opts Options // the Policy fields are read from pol instead
	pol  atomic.Pointer[Policy]
	log  *zap.Logger

	mu       sync.Mutex
	bySource map[srcKey]int // waiters per source address (sources with one)
	byName   map[wantKey]map[waitKey]struct{}
	// udp are the UDP searchers with a waiter, by reply socket; udpWaiting
	// counts their waiters.
	udp        map[netip.AddrPort]*Client
	udpWaiting int
	// udpNames are the names waited for that a UDP searcher's waiter
	// made searched through (the first to wait for them): UDPNameShare.
	udpNames map[wantKey]struct{}
	byRecord map[string]map[wantKey]struct{} // record -> waited record.FIELD names
	searcher Searcher
	udpSink  func(UDPDest, Group) int
	sweepT   clock.Timer
	closed   bool

	tmu  sync.Mutex // guards told; taken after mu when both are held
	told told

	waiting atomic.Int64
	st      counters
	ll      *limitlog.Log
}

type waitKey struct {
	c   *Client
	cid uint32
}

// srcKey is a source address's waiters: its TCP connections', or (udp)
// those of UDP searches naming it as their reply address, counted apart.
type srcKey struct {
	addr netip.Addr
	udp  bool
}

// wantKey is a name waited for by plain clients, or (tls) by clients
// whose search listed "tls".
type wantKey struct {
	name string
	tls  bool
}

type waiter struct {
	name    string
	off     Offer // the search's
	expires time.Time
}

// New returns a resolver answering from reg and subscribed to its commits.
func New(reg *registry.Registry, o Options) *Resolver {
	if o.WaitTTL <= 0 {
		o.WaitTTL = 90 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	r := &Resolver{reg: reg, opts: o, log: o.Logger, ll: limitlog.New(o.Logger, 0, o.Clock),
		bySource: make(map[srcKey]int), udp: make(map[netip.AddrPort]*Client), udpNames: make(map[wantKey]struct{}),
		byName: make(map[wantKey]map[waitKey]struct{}), byRecord: make(map[string]map[wantKey]struct{}),
		told: newTold(o.Clock.Now())}
	r.Apply(o.policy())
	reg.Subscribe(r.onNames)
	reg.SubscribeHandedOver(r.onHandedOver)
	r.mu.Lock()
	r.armSweepLocked()
	r.mu.Unlock()
	return r
}

// sweepEvery is how often expired waiters are swept: a waiter is gone at
// most WaitTTL/4 after it expires.
func (r *Resolver) sweepEvery() time.Duration { return r.opts.WaitTTL / 4 }

func (r *Resolver) armSweepLocked() {
	if r.closed {
		return
	}
	r.sweepT = r.opts.Clock.AfterFunc(r.sweepEvery(), r.sweep)
}

// Close stops the expiry sweep. Clients keep working until closed.
func (r *Resolver) Close() {
	r.mu.Lock()
	r.closed = true
	if r.sweepT != nil {
		r.sweepT.Stop()
	}
	r.mu.Unlock()
}

// SetSearcher installs the search-through hook; names already waited for
// are wanted at once.
func (r *Resolver) SetSearcher(s Searcher) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.searcher != nil {
		for k := range r.byName {
			r.searcher.Drop(k.name, k.tls)
		}
	}
	r.searcher = s
	if s != nil {
		for k := range r.byName {
			s.Want(k.name, k.tls)
		}
	}
}

// Answers is whether the name policy in force lets a search for name be
// answered at all (Options.MaxNameBytes, Options.NameAllowed), as Lookup
// decides it, counting and logging nothing: the operator's view of an
// answer (the HTTP API's ?client=).
func (r *Resolver) Answers(name []byte) bool {
	return r.pol.Load().refuses(name) == answered
}

// Lookup answers every (CID, name) of q in one registry read, grouped per
// claiming server, into b. Names are []byte views and are not kept. A name
// Options.NameAllowed refuses is neither claimed nor listed in b.Missing.
func (r *Resolver) Lookup(q []pva.SearchName, b *Batch) {
	b.Missing = b.Missing[:0]
	b.Groups = b.Groups[:0]
	b.ghold = b.ghold[:0]
	b.gq = b.gq[:0]
	if cap(b.holders) < len(q) {
		b.holders = make([]*registry.Holder, len(q))
	}
	hs := b.holders[:len(q)]
	r.reg.LookupBatch(q, hs)
	pol := r.pol.Load()
	refused := 0
	for i, h := range hs {
		switch pol.refuses(q[i].Name) {
		case tooLong:
			r.tooLong(len(q[i].Name), pol.MaxNameBytes)
			continue
		case denied:
			refused++
			r.logDenied(q[i].Name)
			continue
		}
		if h == nil {
			b.Missing = append(b.Missing, i)
			continue
		}
		g := -1
		for j, gh := range b.ghold { // few servers per batch: a scan beats a map
			if gh == h {
				g = j
				break
			}
		}
		if g < 0 {
			g = len(b.Groups)
			if g < cap(b.Groups) {
				b.Groups = b.Groups[:g+1]
				b.Groups[g].CIDs = b.Groups[g].CIDs[:0]
			} else {
				b.Groups = append(b.Groups, Group{})
			}
			if g < cap(b.gq) {
				b.gq = b.gq[:g+1]
				b.gq[g] = b.gq[g][:0]
			} else {
				b.gq = append(b.gq, nil)
			}
			b.Groups[g].Server = EndpointOf(h)
			b.ghold = append(b.ghold, h)
		}
		b.Groups[g].CIDs = append(b.Groups[g].CIDs, q[i].CID)
		b.gq[g] = append(b.gq[g], int32(i))
	}
	clear(hs) // do not pin removed servers' holders
	r.st.lookups.Add(1)
	r.st.names.Add(uint64(len(q)))
	r.st.misses.Add(uint64(len(b.Missing)))
	if refused > 0 {
		r.st.denied.Add(uint64(refused))
	}
}

// tooLong counts (and logs once per interval) a name over MaxNameBytes.
func (r *Resolver) tooLong(n, max int) {
	r.st.tooLong.Add(1)
	r.ll.Hit("name_length", "name longer than the bound refused (not answered, waited for or searched through)",
		zap.Int("bytes", n), zap.Int("max_name_bytes", max))
}

func (r *Resolver) logDenied(name []byte) {
	if ce := r.log.Check(zap.DebugLevel, "name refused by the name access list"); ce != nil {
		ce.Write(zap.ByteString("name", name))
	}
}

// Stats returns the gauges now.
func (r *Resolver) Stats() Stats {
	r.mu.Lock()
	wn, wu := int64(len(r.byName)), int64(r.udpWaiting)
	r.mu.Unlock()
	return Stats{Waiting: r.waiting.Load(), WaitNames: wn, WaitingUDP: wu, Told: r.toldLen()}
}

// Client is one TCP connection's waiters, or one UDP searcher's (its
// reply socket, udp).
type Client struct {
	r      *Resolver
	src    netip.Addr
	udp    netip.AddrPort // valid for a UDP searcher
	push   func(Group)
	waits  map[uint32]*waiter // by CID; guarded by r.mu
	closed bool
	told   int // answers remembered (told.go); guarded by r.tmu
	// toldDone: closed, as Told sees it (it takes r.tmu, not r.mu).
	toldDone bool // guarded by r.tmu
}

func (c *Client) key() srcKey { return srcKey{c.src, c.udp.IsValid()} }

// NewClient returns the waiter set of one TCP connection. push is called
// when waited names resolve — from the goroutine that committed to the
// registry, or from Wait if the name resolved in between — with the
// resolver's lock held: it must not block (enqueue the reply) and must not
// call back into the resolver. It is never called after Close returns. The
// Group's CIDs slice is the callee's to keep.
func (r *Resolver) NewClient(push func(Group)) *Client {
	return r.NewClientFrom(netip.Addr{}, push)
}

// NewClientFrom is NewClient for a connection from src: its waiters count
// against MaxWaitsPerSource together with every other connection from src.
func (r *Resolver) NewClientFrom(src netip.Addr, push func(Group)) *Client {
	return &Client{r: r, src: src.Unmap(), push: push, waits: make(map[uint32]*waiter)}
}

// Waiting returns how many (CID, name) pairs the client waits for.
func (c *Client) Waiting() int {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return len(c.waits)
}

// Wait remembers the unresolved pairs q[i] for each i in missing (as Lookup
// reported them); off is that search's offer, which every push answering
// these pairs follows (Group.Offer). It copies the names. A
// retry for a pair already waited for refreshes its expiry. Beyond
// MaxWaitsPerClient pairs are dropped and counted (the client's own
// retries still find the name later). A name that resolved since the
// Lookup is pushed at once. A name the access policy refuses is skipped
// (and counted): it is never waited for, so never pushed nor searched
// through.
func (c *Client) Wait(q []pva.SearchName, missing []int, off Offer) {
	r := c.r
	exp := r.opts.Clock.Now().Add(r.opts.WaitTTL)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.closed {
		return
	}
	c.waitLocked(q, missing, off, exp)
}

// WaitUDP is Wait for a UDP search whose replies go to to: the names of q
// at missing that nobody listed are remembered for the searcher and
// searched through, within MaxWaitsPerClient (per reply socket),
// MaxWaitsPerSource (per reply address, apart from TCP connections) and
// MaxUDPWaiters. Without a Searcher (search.through off) nothing is
// remembered: the searcher's next search is answered from the registry.
// With PushUDP, the searcher is answered as soon as the name is learned,
// by the search through or any listing.
func (r *Resolver) WaitUDP(to netip.AddrPort, q []pva.SearchName, missing []int, off Offer) {
	if len(missing) == 0 || !to.IsValid() {
		return
	}
	exp := r.opts.Clock.Now().Add(r.opts.WaitTTL)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.searcher == nil {
		return
	}
	c := r.udp[to]
	if c == nil {
		c = &Client{r: r, src: to.Addr().Unmap(), udp: to, waits: make(map[uint32]*waiter)}
		push := r.opts.PushUDP
		c.push = func(g Group) {
			if push != nil {
				push(to, g)
			}
		}
	}
	c.waitLocked(q, missing, off, exp)
	if len(c.waits) > 0 {
		r.udp[to] = c
	}
}

// MaxUDPWaiters is the bound on the UDP searchers' waiters together
// under p: MaxWaiters / UDPShare (0: no bound, as MaxWaiters).
func (p *Policy) MaxUDPWaiters() int {
	if p.MaxWaiters <= 0 {
		return 0
	}
	return max(1, p.MaxWaiters/UDPShare)
}

func (c *Client) waitLocked(q []pva.SearchName, missing []int, off Offer, exp time.Time) {
	r := c.r
	tls := off.TLS()
	var now []nowClaim
	pol := r.pol.Load()
	for _, i := range missing {
		sn := q[i]
		switch pol.refuses(sn.Name) {
		case tooLong:
			r.tooLong(len(sn.Name), pol.MaxNameBytes)
			continue
		case denied:
			r.st.denied.Add(1)
			continue
		}
		if w, ok := c.waits[sn.CID]; ok {
			if w.name == string(sn.Name) && w.off == off {
				w.expires = exp
				continue
			}
			r.unwaitLocked(c, sn.CID, w) // the CID now means another search
		}
		// Checked under r.mu: a commit either happened before (seen here)
		// or its notification will find this waiter.
		if h := r.reg.Lookup(sn.Name); h != nil && !(tls && r.tlsUnsettledLocked(h)) {
			now = addClaim(now, h, sn.CID)
			r.toldPushLocked(c, sn.CID, maphash.Bytes(r.told.seed, sn.Name), off, h)
			continue
		}
		if !r.roomLocked(c, pol) {
			continue
		}
		name := string(sn.Name)
		wk := wantKey{name, tls}
		udpNew := c.udp.IsValid() && r.byName[wk] == nil
		if udpNew && !r.udpNameRoomLocked(pol) {
			continue
		}
		c.waits[sn.CID] = &waiter{name: name, off: off, expires: exp}
		r.waiting.Add(1)
		r.bySource[c.key()]++
		if c.udp.IsValid() {
			r.udpWaiting++
		}
		ws := r.byName[wk]
		if ws == nil {
			ws = make(map[waitKey]struct{}, 1)
			r.byName[wk] = ws
			if udpNew {
				r.udpNames[wk] = struct{}{}
			}
			if rec, ok := r.reg.RecordOf(sn.Name); ok {
				fs := r.byRecord[string(rec)]
				if fs == nil {
					fs = make(map[wantKey]struct{}, 1)
					r.byRecord[string(rec)] = fs
				}
				fs[wk] = struct{}{}
			}
			if r.searcher != nil {
				r.searcher.Want(name, tls)
			}
		}
		ws[waitKey{c, sn.CID}] = struct{}{}
	}
	for _, nc := range now {
		c.push(Group{Server: EndpointOf(nc.h), CIDs: nc.cids, Offer: off})
		r.st.pushed.Add(uint64(len(nc.cids)))
	}
}

// roomLocked reports whether c may add a waiter, counting (and logging
// once per interval) the bound that refused it.
func (r *Resolver) roomLocked(c *Client, pol *Policy) bool {
	switch {
	case pol.MaxWaitsPerClient > 0 && len(c.waits) >= pol.MaxWaitsPerClient:
		r.st.drops.Add(1)
	case pol.MaxWaitsPerSource > 0 && r.bySource[c.key()] >= pol.MaxWaitsPerSource:
		r.st.dropsSource.Add(1)
		r.ll.Hit("waiters_per_source", "waiters per source address limit reached; names not remembered for push",
			zap.Stringer("client", c.src), zap.Int("max_waiters_per_source", pol.MaxWaitsPerSource))
	case c.udp.IsValid():
		if m := pol.MaxUDPWaiters(); m > 0 && r.udpWaiting >= m {
			r.st.dropsUDP.Add(1)
			r.ll.Hit("waiters_udp", "UDP searchers' waiter limit reached; names not searched through for them",
				zap.Int("max_udp_waiters", m))
			return false
		}
		return true
	case pol.MaxWaiters > 0 && r.waiting.Load()-int64(r.udpWaiting) >= int64(pol.MaxWaiters):
		r.st.dropsTotal.Add(1)
		r.ll.Hit("waiters_total", "waiter limit reached; names not remembered for push",
			zap.Int("max_waiters", pol.MaxWaiters))
	default:
		return true
	}
	return false
}

// udpNameRoomLocked reports whether a UDP searcher may make one more
// name searched through (UDPNameShare), counting a refusal as its
// waiter's.
func (r *Resolver) udpNameRoomLocked(pol *Policy) bool {
	m := pol.MaxUDPWaiters() / UDPNameShare
	if m <= 0 || len(r.udpNames) < m {
		return true
	}
	r.st.dropsUDP.Add(1)
	r.ll.Hit("waiters_udp_names", "UDP searchers' share of names searched through reached; names not searched through for them",
		zap.Int("max_udp_names", m))
	return false
}

// waiterGoneLocked accounts for one waiter of c leaving.
func (r *Resolver) waiterGoneLocked(c *Client) {
	r.waiting.Add(-1)
	k := c.key()
	if n := r.bySource[k] - 1; n > 0 {
		r.bySource[k] = n
	} else {
		delete(r.bySource, k)
	}
	if c.udp.IsValid() {
		r.udpWaiting--
		if len(c.waits) == 0 && r.udp[c.udp] == c {
			delete(r.udp, c.udp) // a UDP searcher is kept only while it waits
		}
	}
}

type nowClaim struct {
	h    *registry.Holder
	cids []uint32
}

func addClaim(cs []nowClaim, h *registry.Holder, cid uint32) []nowClaim {
	for i := range cs {
		if cs[i].h == h {
			cs[i].cids = append(cs[i].cids, cid)
			return cs
		}
	}
	return append(cs, nowClaim{h: h, cids: []uint32{cid}})
}

// tlsUnsettledLocked is whether clients whose search listed "tls" must
// not be answered with h yet: h names no TLS endpoint, no listing of the
// server has settled that it has none, and a search through runs for them.
// Search-through sends a plain and a TLS search; a plain answer can come
// first, and its TCP check registers the server from it with no TLS
// endpoint, though the server may well serve TLS. Pushing that row would
// hand a TLS client the plaintext endpoint (issue 39, never downgrade):
// the waiters stay for their own TLS search's answer instead ("tls", or
// "tcp" from a server without TLS), which reaches them through Answer.
// Without a searcher, nothing would answer them but the client's retry,
// and rows come only from listings and the operator's name files.
func (r *Resolver) tlsUnsettledLocked(h *registry.Holder) bool {
	if h.TLSPort != 0 || r.searcher == nil {
		return false
	}
	info, ok := r.reg.Server(h.GUID)
	return !ok || info.ListedHow != registry.SourceProbe
}

// EndpointOf is the endpoint an answer names for h's names.
func EndpointOf(h *registry.Holder) Endpoint {
	return Endpoint{GUID: h.GUID, Addr: h.Addr, Protocol: h.Protocol, TLSPort: h.TLSPort}
}

// unwaitLocked forgets one waiter, dropping the name's search when it was
// the last.
func (r *Resolver) unwaitLocked(c *Client, cid uint32, w *waiter) {
	delete(c.waits, cid)
	r.waiterGoneLocked(c)
	wk := wantKey{w.name, w.off.TLS()}
	ws := r.byName[wk]
	delete(ws, waitKey{c, cid})
	if len(ws) == 0 {
		r.forgetNameLocked(wk)
	}
}

func (r *Resolver) forgetNameLocked(wk wantKey) {
	delete(r.byName, wk)
	delete(r.udpNames, wk)
	if rec, ok := r.reg.RecordOf([]byte(wk.name)); ok {
		if fs := r.byRecord[string(rec)]; fs != nil {
			delete(fs, wk)
			if len(fs) == 0 {
				delete(r.byRecord, string(rec))
			}
		}
	}
	if r.searcher != nil {
		r.searcher.Drop(wk.name, wk.tls)
	}
}

// Close drops all the client's waiters; push is not called after it
// returns.
func (c *Client) Close() {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	for cid, w := range c.waits {
		r.unwaitLocked(c, cid, w)
	}
	c.closed = true
	r.tmu.Lock()
	c.toldDone = true
	if c.told > 0 {
		r.forgetClientToldLocked(c)
	}
	r.tmu.Unlock()
}

// onNames is the registry's commit hook: answer every waiter for a name
// that just became answerable (or a record.FIELD of it).
func (r *Resolver) onNames(added []string) {
	// The "nobody waits" shortcut must be taken under r.mu: a Wait that
	// looked the name up just before this commit registers its waiter under
	// r.mu, and an unlocked check could miss it and leave it waiting forever.
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.reanswerLocked(added) // after the waiters' pushes, which it then skips
	if len(r.byName) == 0 {
		return
	}
	type key struct {
		c   *Client
		h   *registry.Holder
		off Offer
	}
	var out map[key][]uint32
	var order []key
	answer := func(wn wantKey) {
		ws := r.byName[wn]
		if ws == nil {
			return
		}
		h := r.reg.Lookup([]byte(wn.name))
		if h == nil {
			return // gone again before we got here
		}
		if wn.tls && r.tlsUnsettledLocked(h) {
			return // the TLS search through answers them (Answer)
		}
		if out == nil {
			out = make(map[key][]uint32)
		}
		for wk := range ws {
			// Waiters of one name and kind ("tls" listed or not) may
			// still differ in offer ("tls" alone, or with "tcp"): each
			// is pushed as its own search would have been answered.
			off := wk.c.waits[wk.cid].off
			k := key{wk.c, h, off}
			if _, ok := out[k]; !ok {
				order = append(order, k)
			}
			out[k] = append(out[k], wk.cid)
			delete(wk.c.waits, wk.cid)
			r.waiterGoneLocked(wk.c)
			r.toldPushLocked(wk.c, wk.cid, maphash.String(r.told.seed, wn.name), off, h)
		}
		r.forgetNameLocked(wn)
	}
	for _, n := range added {
		answer(wantKey{n, false})
		answer(wantKey{n, true})
		if fs := r.byRecord[n]; fs != nil {
			for f := range fs {
				answer(f) // may delete from fs: allowed during range
			}
		}
	}
	for _, k := range order {
		cids := out[k]
		k.c.push(Group{Server: EndpointOf(k.h), CIDs: cids, Offer: k.off})
		r.st.pushed.Add(uint64(len(cids)))
	}
}

// Answer pushes e to every client waiting for name now whose search
// listed "tls" (tls) or did not, without the registry: a search-through
// reply is a hint (docs/SECURITY.md, "Trust"), which the clients that
// asked would have believed themselves, but which others get only once a
// TCP exchange has confirmed it and the registry holds it. The answer is
// for the waiters whose protocols the search through listed, and no
// others, each pushed as its own search would have been answered
// (Group.Offer): a "tcp" answer names nothing to a waiter that listed
// "tls" alone. It returns how many waiters were answered.
func (r *Resolver) Answer(name string, tls bool, e Endpoint) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	wn := wantKey{name, tls}
	ws := r.byName[wn]
	if len(ws) == 0 {
		return 0
	}
	type key struct {
		c   *Client
		off Offer // each waiter's search's (onNames)
	}
	out := make(map[key][]uint32)
	var order []key
	for wk := range ws {
		k := key{wk.c, wk.c.waits[wk.cid].off}
		if _, ok := out[k]; !ok {
			order = append(order, k)
		}
		out[k] = append(out[k], wk.cid)
		delete(wk.c.waits, wk.cid)
		r.waiterGoneLocked(wk.c)
	}
	n := len(ws)
	r.forgetNameLocked(wn)
	for _, k := range order {
		k.c.push(Group{Server: e, CIDs: out[k], Offer: k.off})
	}
	r.st.pushed.Add(uint64(n))
	return n
}

// sweep expires waiters whose client stopped retrying.
func (r *Resolver) sweep() {
	now := r.opts.Clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ws := range r.byName {
		for wk := range ws {
			if w := wk.c.waits[wk.cid]; w != nil && !now.Before(w.expires) {
				r.unwaitLocked(wk.c, wk.cid, w)
				n++
			}
		}
	}
	r.st.expired.Add(uint64(n))
	r.tmu.Lock()
	r.expireToldLocked(now)
	r.tmu.Unlock()
	r.armSweepLocked()
}
