// Package twin pairs a client's UDP search socket with the same client's
// TCP name-server connection, so that the answers to its UDP searches can
// go over the connection, where none is lost.
//
// A PVXS client with EPICS_PVA_NAME_SERVERS builds each search message
// once and sends the same bytes to its UDP destinations and to every name
// server connection whose output holds at most 64 KiB (tickSearch); only
// the flags byte (the unicast bit) and the response port (zeroed over TCP)
// differ. When that client starts a large channel set, its answers over
// UDP can be lost (its receive buffer, pvans's reply pacing), and when its
// name-server connection has just come up it searches again only a whole
// revolution of its ring later (6 s, docs/protocol.md "Client search
// ring"). Over its own connection nothing is lost.
//
// Two messages with the same fingerprint (Fingerprint: the search payload
// without those two fields, hashed with this process's random seed), one
// from a UDP socket whose replies go to host:port and one over a TCP
// connection from the same host, pair that socket with that connection.
// Whichever copy arrives second makes the pair; a fingerprint seen from
// two sockets or over two connections of one host pairs nothing (a pair
// it made before the second sender showed ends), and a socket shown on
// two connections is unpaired and not paired again for contestedFor. A
// pair ends with its connection.
//
// Trust: a pair is made only from a connection the host opened itself,
// and only with a socket on that host whose search came from that socket
// itself (not a forwarded copy, nor another socket naming its port; the
// caller checks); answers sent over it name only what the
// resolver would have answered over UDP. A host that can forge its
// neighbour's source address and predict its next TCP search can pair a
// port of its choosing with the neighbour's connection, and then have
// answers for CIDs of its choosing sent there; it can already send that
// client forged UDP search responses naming any address, which is more.
// docs/SECURITY.md says this.
//
// Bounds: at most maxRecent fingerprints per host and Options.Fingerprints in
// all, each matched at most recentFor (a full total sweeps the expired
// away); at most maxPortsPerConn sockets per connection and maxContested
// disputes per host. A host with no TCP connection costs nothing.
package twin

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
)

const (
	// maxRecent bounds the fingerprints kept per host and side: a PVXS
	// client's TCP copies are the first ~47 messages of its tick (64 KiB of
	// 1,400-byte messages), so the first of them is among these.
	maxRecent = 128
	// recentFor is how long a fingerprint waits for its twin: the TCP
	// copies leave the client right after its tick's UDP datagrams.
	recentFor = 2 * time.Second
	// contestedFor keeps a socket shown on two connections unpaired.
	contestedFor = 30 * time.Second
	// maxContested bounds the disputes remembered per host: a search's
	// reply port is the client's word, so one host could dispute every
	// port. Beyond it a dispute still unpairs but is not remembered.
	maxContested = 64
	// maxPortsPerConn: a PVXS client answers on one port per address
	// family.
	maxPortsPerConn = 2
	// sweepEvery: at most this often, a full total sends every host's
	// expired fingerprints away (a host's own go only when it searches
	// again, and a client whose channels are connected does not).
	sweepEvery = recentFor / 8
)

// Table is the pairing of one daemon: its TCP name server's connections
// and its UDP search port's clients. Safe for concurrent use.
type Table struct {
	seed maphash.Seed
	clk  clock.Clock
	max  int // Options.Fingerprints

	conns atomic.Int64 // live connections: none, nothing to do

	mu     sync.Mutex
	hosts  map[netip.Addr]*host
	bound  map[netip.AddrPort]pair
	total  int       // fingerprints kept, all hosts
	swept  time.Time // the last sweep of every host (sweep)
	onPair func(to netip.AddrPort, c *Conn)

	cnt counters
}

type counters struct {
	Paired     metrics.Counter `metric:"pvans_twin_pairs_made_total" help:"Pairs made: a UDP search and the same search over a TCP connection from the same host."`
	Unpaired   metrics.Counter `metric:"pvans_twin_pairs_ended_total" help:"Pairs ended: the connection closed, or the socket's searches showed up on another connection."`
	Contested  metrics.Counter `metric:"pvans_twin_refused_total" label:"reason=contested" help:"Pairs not made, by reason."`
	Ambiguous  metrics.Counter `metric:"pvans_twin_refused_total" label:"reason=ambiguous"`
	RecentFull metrics.Counter `metric:"pvans_twin_refused_total" label:"reason=recent_full"`
}

// pair is the connection a socket is paired with, and the fingerprint
// that paired them: that fingerprint from a second sender on either side
// ends the pair.
type pair struct {
	c  *Conn
	fp uint64
}

type host struct {
	conns int
	udp   recent[netip.AddrPort]
	tcp   recent[*Conn]
	// contested: until when each reply port shown on two connections
	// stays unpaired (at most maxContested).
	contested map[uint16]time.Time
}

// recent is a bounded set of fingerprints seen from one side, each with
// who sent it; the earliest are kept (a later burst's twins are looked
// for among the first messages of its tick).
type recent[T comparable] struct {
	m     map[uint64]seen[T]
	order []uint64
}

type seen[T comparable] struct {
	from      T
	at        time.Time
	ambiguous bool
}

// Conn is one TCP name-server connection of a client host.
type Conn struct {
	t     *Table
	host  netip.Addr
	offer func([]byte) bool
	ports []netip.AddrPort // under t.mu
	gone  bool             // under t.mu
}

// Options are a table's bounds.
type Options struct {
	// Fingerprints bounds the fingerprints kept over all hosts (~100
	// bytes each); 0 is no bound beyond maxRecent per host and side.
	Fingerprints int
}

// DefaultFingerprints is the bound the daemon passes (issue 40: a
// constant, not a setting): 32,768 fingerprints of about 100 bytes, 2 s
// each, at most 128 per client host and side, are ~3 MiB; beyond it none
// is remembered and pvans_twin_refused_total{reason="recent_full"} counts
// them (docs/SECURITY.md, "Answers over the client's own TCP connection").
const DefaultFingerprints = 32768

// New returns an empty table; clk nil means the wall clock.
func New(clk clock.Clock, o Options) *Table {
	if clk == nil {
		clk = clock.Real{}
	}
	return &Table{seed: maphash.MakeSeed(), clk: clk, max: o.Fingerprints, hosts: map[netip.Addr]*host{},
		bound: map[netip.AddrPort]pair{}}
}

// OnPair sets f, called (outside the table's lock) when the socket whose
// replies go to to is paired with c: replies held for to can go over c.
func (t *Table) OnPair(f func(to netip.AddrPort, c *Conn)) {
	t.mu.Lock()
	t.onPair = f
	t.mu.Unlock()
}

// pvxsSeq is the searchSequenceID every PVXS search carries, big endian
// ("find", client.cpp tickSearch), over UDP and TCP alike.
const pvxsSeq = "find"

// Fingerprint hashes a CMD_SEARCH payload without its flags byte and its
// response port, the two fields a PVXS client's TCP copy changes; ok is
// false for a payload too short to be a search, and for one that is not
// in the form of a PVXS search, whose sequence is "find": such a search
// can have no twin and takes no pairing memory. A Phoebus (Java) client
// numbers its UDP searches by its search bucket and sends "look" ("kool"
// little endian) over TCP, so its two copies never match, and it
// searches every unconnected channel each time it opens one: recording
// its searches filled the table and refused other clients' fingerprints.
//
// The payload is hashed in two calls (the fields before the flags and
// between them and the port; the rest), not streamed through a
// maphash.Hash (~15 % dearer for a 1,400-byte search). A caller that
// checks Active first pays no hash while no connection is open.
func (t *Table) Fingerprint(payload []byte) (fp uint64, ok bool) {
	// searchSequenceID(4) flags(1) reserved(3) address(16) port(2) …
	if len(payload) < 26 || string(payload[:4]) != pvxsSeq {
		return 0, false
	}
	var head [4 + 19]byte
	copy(head[:4], payload[:4])
	copy(head[4:], payload[5:24])
	return maphash.Bytes(t.seed, payload[26:]) ^ maphash.Bytes(t.seed, head[:])*0x9e3779b97f4a7c15, true
}

// Active reports whether a TCP name-server connection is open: while
// none is, no search can pair (UDPSearch returns nil, false), so the
// answer path need not fingerprint its searches.
func (t *Table) Active() bool { return t != nil && t.conns.Load() > 0 }

// Join registers a TCP name-server connection from the address from; offer queues a
// message on it without ever closing it, reporting false when it would not
// fit. Call Leave when the connection ends.
func (t *Table) Join(from netip.Addr, offer func([]byte) bool) *Conn {
	c := &Conn{t: t, host: from.Unmap(), offer: offer}
	t.mu.Lock()
	h := t.hosts[c.host]
	if h == nil {
		h = &host{}
		t.hosts[c.host] = h
	}
	h.conns++
	t.mu.Unlock()
	t.conns.Add(1)
	return c
}

// Leave ends c's pairs and forgets it.
func (c *Conn) Leave() {
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.gone {
		return
	}
	c.gone = true
	t.conns.Add(-1)
	for _, p := range c.ports {
		if t.bound[p].c == c {
			delete(t.bound, p)
			t.cnt.Unpaired.Add(1)
		}
	}
	c.ports = nil
	h := t.hosts[c.host]
	if h == nil {
		return
	}
	h.tcp.drop(func(from *Conn) bool { return from == c }, &t.total)
	if h.conns--; h.conns <= 0 {
		t.total -= len(h.udp.order) + len(h.tcp.order)
		delete(t.hosts, c.host)
	}
}

// Send offers b to the connection (false: it would not fit, or is gone).
func (c *Conn) Send(b []byte) bool { return c.offer(b) }

// TCPSearch notes a search message with fingerprint fp sent over c.
func (c *Conn) TCPSearch(fp uint64) {
	t := c.t
	t.mu.Lock()
	h := t.hosts[c.host]
	if h == nil || c.gone {
		t.mu.Unlock()
		return
	}
	now := t.clk.Now()
	pairTo, found := other(&h.udp, fp, now, &t.cnt)
	if !found {
		t.noteTCP(h, fp, c, now)
	}
	f := t.pairLocked(h, pairTo, c, fp, now)
	t.mu.Unlock()
	if f != nil {
		f(pairTo, c)
	}
}

// UDPSearch notes a search with fingerprint fp from the UDP socket whose
// replies go to to (a search that came from to itself, not a
// forwarded copy), and returns the connection to is paired with, or nil
// and whether it may yet be paired (its host has a connection and it is
// not contested).
func (t *Table) UDPSearch(to netip.AddrPort, fp uint64) (c *Conn, candidate bool) {
	if t == nil || t.conns.Load() == 0 {
		return nil, false
	}
	to = netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
	t.mu.Lock()
	h := t.hosts[to.Addr()]
	if h == nil {
		t.mu.Unlock()
		return nil, false
	}
	// A paired socket's searches are still compared: its messages
	// showing up on another connection end the pair.
	now := t.clk.Now()
	c, found := other(&h.tcp, fp, now, &t.cnt)
	if !found {
		t.noteUDP(h, fp, to, now)
	}
	f := t.pairLocked(h, to, c, fp, now)
	cur := t.bound[to].c
	until, contested := h.contested[to.Port()]
	candidate = cur == nil && (!contested || !now.Before(until))
	t.mu.Unlock()
	if f != nil {
		f(to, cur)
	}
	return cur, candidate
}

// Paired returns the connection the socket whose replies go to is
// paired with (nil: none).
func (t *Table) Paired(to netip.AddrPort) *Conn {
	if t == nil || t.conns.Load() == 0 {
		return nil
	}
	to = netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bound[to].c
}

// pairLocked pairs to with c, both of host h, by fingerprint fp when
// both are set and nothing contests it; it returns the OnPair callback to
// run after unlocking (nil: no new pair).
func (t *Table) pairLocked(h *host, to netip.AddrPort, c *Conn, fp uint64, now time.Time) func(netip.AddrPort, *Conn) {
	if c == nil || !to.IsValid() || c.gone || to.Addr() != c.host {
		return nil
	}
	if until, ok := h.contested[to.Port()]; ok {
		if now.Before(until) {
			return nil
		}
		delete(h.contested, to.Port())
	}
	switch cur := t.bound[to].c; {
	case cur == c:
		return nil
	case cur != nil:
		// One socket's searches over two connections: two processes
		// sending the same bytes, or a forgery. Pair neither.
		t.unpair(h, to, cur, now)
		return nil
	}
	if len(c.ports) >= maxPortsPerConn {
		t.cnt.Contested.Add(1)
		return nil
	}
	c.ports = append(c.ports, to)
	t.bound[to] = pair{c: c, fp: fp}
	t.cnt.Paired.Add(1)
	return t.onPair
}

// unpair ends the pair of to with cur and keeps to unpaired for
// contestedFor.
func (t *Table) unpair(h *host, to netip.AddrPort, cur *Conn, now time.Time) {
	cur.unport(to)
	delete(t.bound, to)
	h.contest(to.Port(), now)
	t.cnt.Contested.Add(1)
	t.cnt.Unpaired.Add(1)
}

// contest keeps port unpaired for contestedFor, if there is room once
// the expired disputes are gone.
func (h *host) contest(port uint16, now time.Time) {
	if h.contested == nil {
		h.contested = map[uint16]time.Time{}
	}
	if _, ok := h.contested[port]; !ok && len(h.contested) >= maxContested {
		for p, until := range h.contested {
			if !now.Before(until) {
				delete(h.contested, p)
			}
		}
		if len(h.contested) >= maxContested {
			return
		}
	}
	h.contested[port] = now.Add(contestedFor)
}

func (c *Conn) unport(to netip.AddrPort) {
	for i, p := range c.ports {
		if p == to {
			c.ports = append(c.ports[:i], c.ports[i+1:]...)
			return
		}
	}
}

// noteUDP records fp from to. When another socket sent fp first and was
// paired by it (its copy over the connection came before this one), that
// pair ends: the same bytes from two sockets pair neither, whichever
// order they come in.
func (t *Table) noteUDP(h *host, fp uint64, to netip.AddrPort, now time.Time) {
	first, split := record(t, &h.udp, fp, to, now)
	if !split {
		return
	}
	if b := t.bound[first]; b.c != nil && b.fp == fp {
		t.unpair(h, first, b.c, now)
	}
}

// noteTCP records fp over c. When another connection sent fp first and a
// socket was paired with it by fp, that pair ends, as in noteUDP.
func (t *Table) noteTCP(h *host, fp uint64, c *Conn, now time.Time) {
	first, split := record(t, &h.tcp, fp, c, now)
	if !split {
		return
	}
	for i := 0; i < len(first.ports); {
		if to := first.ports[i]; t.bound[to] == (pair{c: first, fp: fp}) {
			t.unpair(h, to, first, now) // removes first.ports[i]
			continue
		}
		i++
	}
}

// record adds fp from from to r, sweeping every host's expired
// fingerprints once when there is no room; a fingerprint still refused is
// counted. first and split are add's.
func record[T comparable](t *Table, r *recent[T], fp uint64, from T, now time.Time) (first T, split bool) {
	ok, first, split := r.add(fp, from, now, &t.total, t.max)
	if !ok && t.sweep(now) {
		ok, first, split = r.add(fp, from, now, &t.total, t.max)
	}
	if !ok {
		t.cnt.RecentFull.Add(1)
	}
	return first, split
}

// full: the fingerprints kept reach Options.Fingerprints.
func (t *Table) full() bool { return t.max > 0 && t.total >= t.max }

// sweep drops every host's expired fingerprints when the total is
// reached and the last sweep is sweepEvery old; it reports whether any
// went.
func (t *Table) sweep(now time.Time) bool {
	if !t.full() || now.Sub(t.swept) < sweepEvery {
		return false
	}
	t.swept = now
	n := t.total
	for _, h := range t.hosts {
		h.udp.expire(now, &t.total)
		h.tcp.expire(now, &t.total)
	}
	return t.total < n
}

// other returns who sent fp on the other side when one sender did
// (zero when several did: ambiguous, counted); found: fp was seen there.
func other[T comparable](r *recent[T], fp uint64, now time.Time, cnt *counters) (from T, found bool) {
	s, ok := r.get(fp, now)
	if !ok {
		return from, false
	}
	if s.ambiguous {
		cnt.Ambiguous.Add(1)
		return from, true
	}
	return s.from, true
}

// get returns the live entry for fp.
func (r *recent[T]) get(fp uint64, now time.Time) (seen[T], bool) {
	s, ok := r.m[fp]
	if !ok || now.Sub(s.at) > recentFor {
		return seen[T]{}, false
	}
	return s, true
}

// add records fp from from; the same fingerprint from another sender
// marks it ambiguous (split, the first sender in first). It reports false
// when there was no room. Entries are added in time order and never
// refreshed, so expiry takes from the front.
func (r *recent[T]) add(fp uint64, from T, now time.Time, total *int, max int) (ok bool, first T, split bool) {
	r.expire(now, total)
	if s, ok := r.m[fp]; ok {
		if s.from != from && !s.ambiguous {
			s.ambiguous = true
			r.m[fp] = s
			return true, s.from, true
		}
		return true, first, false
	}
	if len(r.order) >= maxRecent || (max > 0 && *total >= max) {
		return false, first, false
	}
	if r.m == nil {
		r.m = map[uint64]seen[T]{}
	}
	r.order = append(r.order, fp)
	*total++
	r.m[fp] = seen[T]{from: from, at: now}
	return true, first, false
}

// expire drops the entries older than recentFor (the oldest come first).
func (r *recent[T]) expire(now time.Time, total *int) {
	n := 0
	for n < len(r.order) {
		if s, ok := r.m[r.order[n]]; ok && now.Sub(s.at) <= recentFor {
			break
		}
		delete(r.m, r.order[n])
		n++
	}
	if n > 0 {
		r.order = append(r.order[:0], r.order[n:]...)
		*total -= n
	}
}

// drop removes the entries whose sender matches.
func (r *recent[T]) drop(match func(T) bool, total *int) {
	kept := r.order[:0]
	for _, fp := range r.order {
		if s := r.m[fp]; match(s.from) {
			delete(r.m, fp)
			*total--
			continue
		}
		kept = append(kept, fp)
	}
	r.order = kept
}

// Stats are the table's counts and sizes.
type Stats struct {
	Conns, Paired int
}

// Stats returns the counts now.
func (t *Table) Stats() Stats {
	t.mu.Lock()
	paired := len(t.bound)
	t.mu.Unlock()
	return Stats{Conns: int(t.conns.Load()), Paired: paired}
}
