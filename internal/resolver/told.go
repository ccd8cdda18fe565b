package resolver

// Restart fan-out (issue 38): a client that searches just as its server
// dies is answered with the dead endpoint — pvans learns of the death a
// moment later, from the same TCP close — and a pvAccessCPP client whose
// connection is then refused waits ~28.6 s before it searches again;
// across a router no new IOC's beacon reaches it to hurry it. Every
// client accepts a search response for a CID it is still searching,
// whenever it comes (PVXS looks the CID up, pvAccessCPP and Phoebus
// match by CID and ignore the sequence). So the resolver remembers, for a
// while, which clients it told which server (told), and when a name it
// told is claimed by another server while the one it told is gone, it
// answers that CID again with the new holder: over the client's TCP
// connection (Client's push), or to the UDP reply address through the
// UDP sink (SetUDPSink), without waiting for the client's next search.

import (
	"hash/maphash"
	"net/netip"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

const (
	// ToldTTL is how long an answer over UDP is remembered for a
	// re-answer (a TCP connection's last while it is open): the
	// time a restart may take between the death that made a client be
	// told a dead endpoint and the new instance being listed. A soft IOC
	// restarts within seconds and a host reboot within a minute or two; a
	// client whose answer is older was either connected (and then lost
	// its server and searched again, which is remembered anew) or has
	// searched again on its own schedule (pvAccessCPP after ~30 s, PVXS
	// and Phoebus sooner).
	ToldTTL = 60 * time.Second
	// toldRefresh: the same answer told again within this of when it was
	// remembered leaves the entry as it is (its TTL runs from the first),
	// so a client searching the same names again and again costs a hash
	// and a map probe per name, no list work: an entry then lives from
	// ToldTTL-toldRefresh to ToldTTL after the client's last answer.
	toldRefresh = ToldTTL / 12
	// ToldPerServer is how many answers naming one server are remembered
	// (the most recent): a restart re-answers at most that many CIDs. A
	// Phoebus display of 50,000 channels over 10 IOCs asks ~5,000 names
	// of each, and a few such clients fit; beyond it the oldest answers
	// go, and those clients find the new instance on their own retry.
	ToldPerServer = 8192
	// ToldTotal bounds the answers remembered for all servers together:
	// no name is kept, only its hash, but at worst (every answer to a
	// reply socket of its own, which a spoofed search can name) an entry
	// brings its client's table: ~510 B each, so 64 Ki entries are ~32 MiB
	// (TestToldProductionBounds). The oldest go first.
	ToldTotal = 1 << 16
)

// UDPDest is where a UDP answer went: the reply address, and the local
// address and interface it was sent from (a reply naming "any" is read
// by a PVXS client as naming its source).
type UDPDest struct {
	To   netip.AddrPort
	From netip.Addr
	Pin  int
}

// toldKey is one client: a TCP connection (c), or a UDP reply address
// (c nil).
type toldKey struct {
	c  *Client
	to netip.AddrPort
}

// toldDest is what one client was told, by CID: a search's answers cost
// one lookup of the client (its key is slow to hash) and one fast one per
// CID. udp is where its latest UDP answer went (and from): a re-answer
// goes there.
type toldDest struct {
	key   toldKey
	udp   UDPDest
	byCID map[uint32]*toldEntry
}

// toldServer is the endpoint an answer named, as listed (its plain
// endpoint, whatever a TLS client was told).
type toldServer struct {
	guid pva.GUID
	addr netip.AddrPort
}

// toldEntry is one remembered answer. Entries are on two lists in the
// order they were told (so oldest first): all of them (ToldTotal, ToldTTL)
// and their server's (ToldPerServer).
type toldEntry struct {
	dest *toldDest
	srv  *toldList
	name uint64        // maphash of the name: no allocation on the answer path
	at   time.Duration // when remembered, since told.base (no pointer to write)
	cid  uint32
	off  Offer // the offer of the search told (a re-answer's)

	prev, next   *toldEntry // all entries
	sprev, snext *toldEntry // the server's
}

type toldList struct {
	srv toldServer
	// h is the server's holder when an answer was last remembered: while
	// the registry still has it (Registry.Current), the server is
	// registered as told, which the fan-out checks without a database
	// read on every commit.
	h          *registry.Holder
	n          int
	head, tail *toldEntry
}

// told is the memory of recent answers; guarded by Resolver.tmu, taken
// after Resolver.mu when both are held.
type told struct {
	seed       maphash.Seed
	base       time.Time // what toldEntry.at counts from
	byDest     map[toldKey]*toldDest
	n          int // entries
	bySrv      map[toldServer]*toldList
	head, tail *toldEntry
	free       []*toldEntry // forgotten entries, for reuse
}

func newTold(now time.Time) told {
	return told{seed: maphash.MakeSeed(), base: now, byDest: map[toldKey]*toldDest{}, bySrv: map[toldServer]*toldList{}}
}

// SetUDPSink installs where UDP re-answers go; sink returns how many of
// the Group's CIDs it sent (or queued). It is called with the resolver's
// locks held: it must not block (queue the reply) and must not call back
// into the resolver. The Group's CIDs slice is the callee's.
func (r *Resolver) SetUDPSink(sink func(UDPDest, Group) int) {
	r.mu.Lock()
	r.udpSink = sink
	r.mu.Unlock()
}

// ToldUDP remembers that the UDP reply address d was sent sent (a subset
// of b.Groups[gi].CIDs, in its order) naming that group's server, in
// answer to a search q (the one b was looked up for) whose offer was off:
// a re-answer is decided for that offer (Group.Offer).
func (r *Resolver) ToldUDP(d UDPDest, q []pva.SearchName, b *Batch, gi int, sent []uint32, off Offer) {
	r.toldBatch(toldKey{to: d.To}, d, q, b, gi, sent, off)
}

// Told remembers that the client was sent group gi of b (looked up for q)
// in answer to a search whose offer was off. It takes only the told lock,
// not the resolver's: Close marks the client (toldDone) under the told
// lock too, so nothing is remembered for it after.
func (c *Client) Told(q []pva.SearchName, b *Batch, gi int, off Offer) {
	c.r.toldBatch(toldKey{c: c}, UDPDest{}, q, b, gi, b.Groups[gi].CIDs, off)
}

func (r *Resolver) toldBatch(k toldKey, d UDPDest, q []pva.SearchName, b *Batch, gi int, sent []uint32, off Offer) {
	if gi >= len(b.Groups) || gi >= len(b.gq) {
		return
	}
	g := &b.Groups[gi]
	at := b.gq[gi]
	srv := toldServer{guid: g.Server.GUID, addr: g.Server.Addr}
	now := r.opts.Clock.Now()
	r.tmu.Lock()
	defer r.tmu.Unlock()
	if k.c != nil && k.c.toldDone {
		return
	}
	r.expireToldLocked(now)
	l := r.toldListLocked(srv)
	if gi < len(b.ghold) {
		l.h = b.ghold[gi]
	}
	dst := r.toldDestLocked(k, len(sent))
	dst.udp = d
	since := now.Sub(r.told.base)
	j := 0
	for _, cid := range sent {
		for j < len(g.CIDs) && g.CIDs[j] != cid {
			j++
		}
		if j == len(g.CIDs) {
			return // not a subset in order: nothing more to match
		}
		name := maphash.Bytes(r.told.seed, q[at[j]].Name)
		j++
		if e := dst.byCID[cid]; e != nil && e.srv == l && e.name == name && e.off == off && since-e.at < toldRefresh {
			continue // told the same a moment ago (toldRefresh)
		}
		r.rememberInLocked(l, dst, cid, name, off, since)
	}
}

// rememberLocked records one answer, replacing what k was told before;
// r.tmu held. A client searching the same names again (the common case
// on the answer path) costs a map lookup and moving its entry to the
// lists' ends: no allocation.
func (r *Resolver) rememberLocked(k toldKey, cid uint32, name uint64, off Offer, srv toldServer, now time.Time) {
	r.rememberInLocked(r.toldListLocked(srv), r.toldDestLocked(k, 1), cid, name, off, now.Sub(r.told.base))
}

// toldDestLocked is k's table, made if it has none (for about n CIDs:
// a search's first answer fills it without growing it).
func (r *Resolver) toldDestLocked(k toldKey, n int) *toldDest {
	dst := r.told.byDest[k]
	if dst == nil {
		dst = &toldDest{key: k, byCID: make(map[uint32]*toldEntry, n)}
		r.told.byDest[k] = dst
	}
	return dst
}

// toldListLocked is srv's list, made if it has none.
func (r *Resolver) toldListLocked(srv toldServer) *toldList {
	l := r.told.bySrv[srv]
	if l == nil {
		l = &toldList{srv: srv}
		r.told.bySrv[srv] = l
	}
	return l
}

// rememberInLocked is rememberLocked onto l, its server's list, and dst,
// its client's table (both kept in their maps even if taking the CID's
// old entry off, or a drop, emptied them).
func (r *Resolver) rememberInLocked(l *toldList, dst *toldDest, cid uint32, name uint64, off Offer, at time.Duration) {
	t := &r.told
	e := dst.byCID[cid]
	if e != nil {
		r.unlinkToldLocked(e)
	}
	if l.n >= ToldPerServer {
		r.dropToldLocked(l.head)
		r.st.toldEvicted.Add(1)
	} else if e == nil && t.n >= ToldTotal {
		r.dropToldLocked(t.head)
		r.st.toldEvicted.Add(1)
	}
	if e == nil {
		if n := len(t.free); n > 0 {
			e, t.free = t.free[n-1], t.free[:n-1]
		} else {
			e = new(toldEntry)
		}
		if len(dst.byCID) == 0 {
			t.byDest[dst.key] = dst // new, or emptied by the drop above
		}
		dst.byCID[cid] = e
		t.n++
	}
	*e = toldEntry{dest: dst, cid: cid, name: name, off: off, at: at, srv: l}
	e.prev = t.tail
	if t.tail != nil {
		t.tail.next = e
	} else {
		t.head = e
	}
	t.tail = e
	e.sprev = l.tail
	if l.tail != nil {
		l.tail.snext = e
	} else {
		l.head = e
	}
	l.tail = e
	if l.n++; l.n == 1 {
		t.bySrv[l.srv] = l // new, or emptied above
	}
	if c := dst.key.c; c != nil {
		c.told++
	}
}

// toldPushLocked remembers a push to a waiter of c (the name's hash),
// so that the fan-out does not answer it again; r.mu held.
//
// A UDP searcher's push is not remembered by its Client: that Client
// lives only while it waits, a new one each outage, and is never closed,
// so an entry by it was never forgotten and a client searching through
// every restart gathered one more entry, and one more datagram, per
// restart. Its answers are remembered by reply address (ToldUDP) instead,
// where the search answered paid for one repeat: the push answers that
// CID, so its remembered answer is forgotten, not repeated; the push
// itself is not remembered (nothing paid for its repeat, and the client
// searches again on its own if it needs to).
func (r *Resolver) toldPushLocked(c *Client, cid uint32, name uint64, off Offer, h *registry.Holder) {
	r.tmu.Lock()
	if c.udp.IsValid() {
		if dst := r.told.byDest[toldKey{to: c.udp}]; dst != nil {
			if e := dst.byCID[cid]; e != nil {
				r.dropToldLocked(e)
			}
		}
		r.tmu.Unlock()
		return
	}
	srv := toldServer{guid: h.GUID, addr: h.Addr}
	r.toldListLocked(srv).h = h
	r.rememberLocked(toldKey{c: c}, cid, name, off, srv, r.opts.Clock.Now())
	r.tmu.Unlock()
}

// unlinkToldLocked takes e off both lists (its map slot stays).
func (r *Resolver) unlinkToldLocked(e *toldEntry) {
	t := &r.told
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		t.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		t.tail = e.prev
	}
	l := e.srv
	if e.sprev != nil {
		e.sprev.snext = e.snext
	} else {
		l.head = e.snext
	}
	if e.snext != nil {
		e.snext.sprev = e.sprev
	} else {
		l.tail = e.sprev
	}
	l.n--
	if l.n == 0 {
		delete(t.bySrv, l.srv)
	}
	if c := e.dest.key.c; c != nil {
		c.told--
	}
	e.prev, e.next, e.sprev, e.snext = nil, nil, nil, nil
}

// dropToldLocked forgets e.
func (r *Resolver) dropToldLocked(e *toldEntry) {
	r.unlinkToldLocked(e)
	t := &r.told
	dst := e.dest
	delete(dst.byCID, e.cid)
	if len(dst.byCID) == 0 {
		delete(t.byDest, dst.key)
	}
	t.n--
	if len(t.free) < maxToldFree {
		*e = toldEntry{}
		t.free = append(t.free, e)
	}
}

// maxToldFree bounds the forgotten entries kept for reuse: enough for a
// client's burst to churn without garbage, little beside ToldTotal.
const maxToldFree = 1024

// expireToldLocked forgets the UDP answers older than ToldTTL. A TCP
// connection's answers last while it is open (its close forgets them),
// within ToldPerServer and ToldTotal: a Phoebus client connects on an
// answer and never searches that name again, so a restart hours later has
// only the remembered answer to go by. An old one is moved to the lists'
// ends, so each is touched once a ToldTTL.
func (r *Resolver) expireToldLocked(now time.Time) {
	since := now.Sub(r.told.base)
	for e := r.told.head; e != nil && since-e.at >= ToldTTL; e = r.told.head {
		if e.dest.key.c != nil {
			r.rememberInLocked(e.srv, e.dest, e.cid, e.name, e.off, since)
			continue
		}
		r.dropToldLocked(e)
	}
}

// forgetClientToldLocked forgets what a closing connection was told.
func (r *Resolver) forgetClientToldLocked(c *Client) {
	if dst := r.told.byDest[toldKey{c: c}]; dst != nil {
		for _, e := range dst.byCID {
			r.dropToldLocked(e)
		}
	}
}

// onHandedOver is the registry's hook for names that passed in place to
// a server listed at the endpoint of one it replaced (a restart confirmed
// over TCP before the old instance's loss was seen).
func (r *Resolver) onHandedOver(names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reanswerLocked(names)
}

// reanswerLocked is the fan-out, run on every commit that gave names a
// holder (added): each remembered answer for one of those names that
// named a server now gone — no longer registered, or registered at
// another endpoint — is answered again with the name's holder now, once,
// and forgotten. An answer naming a server still registered is left
// alone: the client may be connected to it, and a reply with another
// GUID for a connected channel is a duplicate to PVXS and Phoebus. r.mu
// held (a TCP Client's push is called under it).
func (r *Resolver) reanswerLocked(added []string) {
	r.tmu.Lock()
	defer r.tmu.Unlock()
	t := &r.told
	r.expireToldLocked(r.opts.Clock.Now())
	if t.n == 0 {
		return
	}
	// The servers answers named that are gone. A restart or a loss takes
	// few servers at a time: their lists are walked, not the names.
	var gone []*toldList
	for srv, l := range t.bySrv {
		if l.h != nil && r.reg.Current(l.h) {
			continue // registered as told: no database read per commit
		}
		if s, ok := r.reg.Server(srv.guid); !ok || s.Addr != srv.addr {
			gone = append(gone, l)
		}
	}
	if len(gone) == 0 {
		return
	}
	names := make(map[uint64]string, len(added))
	for _, n := range added {
		names[maphash.String(t.seed, n)] = n
	}
	type dest struct {
		c   *Client
		udp UDPDest
		h   *registry.Holder
		off Offer
	}
	out := map[dest][]uint32{}
	hashes := map[dest][]uint64{} // a connection's names, remembered anew below
	var order []dest
	for _, l := range gone {
		for e := l.head; e != nil; {
			next := e.snext
			n, ok := names[e.name]
			if !ok {
				e = next
				continue
			}
			h := r.reg.Lookup([]byte(n))
			if h == nil || (h.GUID == l.srv.guid && h.Addr == l.srv.addr) {
				e = next
				continue
			}
			if e.off.TLS() && r.tlsUnsettledLocked(h) {
				// A row with no TLS endpoint yet (a plain search-through
				// answer's): never downgrade a TLS client. Its entry
				// stays; the client's own search finds the new instance.
				e = next
				continue
			}
			k := dest{c: e.dest.key.c, udp: e.dest.udp, h: h, off: e.off}
			if _, seen := out[k]; !seen {
				order = append(order, k)
			}
			out[k] = append(out[k], e.cid)
			if k.c != nil {
				hashes[k] = append(hashes[k], e.name)
			}
			r.dropToldLocked(e)
			e = next
		}
	}
	for _, k := range order {
		g := Group{Server: EndpointOf(k.h), CIDs: out[k], Offer: k.off}
		if k.c != nil {
			if !k.c.closed {
				k.c.push(g)
				r.st.reTCP.Add(uint64(len(g.CIDs)))
				// Told again, and remembered so: a client that connects on
				// this answer (Phoebus) searches no more, and the server's
				// next restart re-answers it too.
				srv, now := toldServer{guid: k.h.GUID, addr: k.h.Addr}, r.opts.Clock.Now()
				r.toldListLocked(srv).h = k.h
				for i, cid := range out[k] {
					r.rememberLocked(toldKey{c: k.c}, cid, hashes[k][i], k.off, srv, now)
				}
			}
			continue
		}
		if r.udpSink != nil {
			r.st.reUDP.Add(uint64(r.udpSink(k.udp, g)))
		}
	}
}

// toldLen is how many answers are remembered.
func (r *Resolver) toldLen() int {
	r.tmu.Lock()
	defer r.tmu.Unlock()
	return r.told.n
}
