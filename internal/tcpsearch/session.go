package tcpsearch

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/pvans-project/pvans/internal/answer"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/ratelimit"
	"github.com/pvans-project/pvans/internal/twin"
)

// session is the search state of one connection. Message runs on the
// connection's read goroutine; push runs on whatever goroutine the
// resolver calls it from, so it has its own buffer under pushMu.
type session struct {
	s      *Server
	search pva.Search
	batch  Batch
	out    []byte
	waiter Waiter   // created on the first answer or unresolved name (read goroutine)
	fresh  []uint64 // scratch of admitSearch
	// rep is the last search's answer (package answer); its Claims are
	// the scratch of the next.
	rep answer.Reply
	// twin pairs this connection with its client's UDP socket (nil
	// without Options.Twins); conn is set once Serve returned.
	twin *twin.Conn
	conn atomic.Pointer[pvaconn.Conn]

	lastSeq atomic.Uint32 // echoed in pushed replies: PVXS correlates by CID only
	// src is the client's address (per-source connection accounting, and
	// what Endpoint.Wire names a server by to this client).
	src     netip.Addr
	overTLS bool // accepted on the TLS listener
	// verified: the TLS handshake completed and the access rule admitted
	// account, the x509 account of the client's certificate ("" for
	// none), which is written before verified (Server.verifyClient).
	verified atomic.Bool
	account  string

	pushMu  sync.Mutex
	pushBuf []byte
}

func (ss *session) Message(c *pvaconn.Conn, h pva.Header, payload []byte) {
	pol := ss.s.pol.Load()
	// A search pays here only while its source is idle: a busy one's is
	// priced by its repeats once decoded (admitSearch).
	paid := h.Command == pva.CmdSearch && pol.limit.PayIfIdle(c.Remote().Addr(), 1)
	if h.Command != pva.CmdSearch && !pol.limit.Allow(c.Remote().Addr()) {
		ss.s.cnt.rateLimited.Add(1)
		return
	}
	switch h.Command {
	case pva.CmdSearch:
		ss.handleSearch(c, h, payload, pol, paid)
	case pva.CmdCreateChannel:
		if p := ss.s.opt.Channels; p != nil && p.Message(c, h, payload) {
			return
		}
		ss.refuseChannels(c, h, payload)
	default:
		if p := ss.s.opt.Channels; p != nil && p.Message(c, h, payload) {
			return
		}
		ss.s.cnt.ignored.Add(1)
	}
}

func (ss *session) Closed(c *pvaconn.Conn, err error) {
	// The socket is closed: its source's share is given back now, not
	// after the teardown below, which waits for the resolver's lock
	// (seconds on a loaded host, under busy clients): a client
	// reconnecting meanwhile was refused at its source's bound. Its place
	// under MaxConns is kept until the teardown ends (forget), so waiting
	// teardowns stay bounded.
	ss.s.release(ss.src)
	ss.s.closedAtBound(c, err)
	if ss.waiter != nil {
		ss.waiter.Close()
	}
	if ss.twin != nil {
		ss.twin.Leave()
	}
	if p := ss.s.opt.Channels; p != nil {
		p.Closed(c)
	}
	ss.s.forget(c)
}

func (ss *session) handleSearch(c *pvaconn.Conn, h pva.Header, payload []byte, pol *policy, paid bool) {
	cnt := &ss.s.cnt
	q := &ss.search
	// PVXS clients send searches big endian even on a little-endian
	// connection: decode with the message's own order.
	if err := q.Decode(payload, h.BigEndian()); err != nil {
		cnt.decodeErrors.Add(1)
		c.Close() // PVXS disconnects on a malformed search
		return
	}
	if !paid && !ss.admitSearch(pol, c.Remote().Addr(), q.Names) {
		cnt.rateLimited.Add(1)
		return
	}
	if m := pol.MaxNamesPerSearch; m > 0 && len(q.Names) > m {
		cnt.namesDropped.Add(uint64(len(q.Names) - m))
		q.Names = q.Names[:m]
	}
	cnt.searches.Add(1)
	cnt.names.Add(uint64(len(q.Names)))
	ss.lastSeq.Store(q.Seq)
	ss.noteTwin(payload)
	out := ss.answer(ss.out[:0], q, payload, c.Flags(), c.Local().Port())
	rep := &ss.rep
	// Remembered before the answer leaves: a client may act on it (and
	// its server restart) before this goroutine runs again, and an
	// answer remembered late would miss the restart's re-answer.
	if len(rep.Claims) > 0 {
		w := ss.waiterFor(c)
		for i := range rep.Claims {
			w.Told(q.Names, &ss.batch, rep.Claims[i].Group, rep.Offer)
		}
	}
	if len(out) > 0 && c.Send(out) != nil {
		cnt.sendErrors.Add(1)
	}
	ss.out = out
	if rep.Wait {
		ss.waiterFor(c).Wait(q.Names, ss.batch.Missing, rep.Offer)
	}
}

// waiterFor is the connection's waiter set, made at its first use.
func (ss *session) waiterFor(c *pvaconn.Conn) Waiter {
	if ss.waiter == nil {
		ss.waiter = ss.s.res.NewClient(ss.src, func(g Group) { ss.push(c, g) })
	}
	return ss.waiter
}

// admitSearch charges a busy source's search to its message budget by
// the share of its names it did not search within
// ratelimit.RepeatWindow, a 64th for the others (docs/SECURITY.md,
// "Repeated searches"): a Phoebus client searches every channel not yet
// connected each time it opens one.
func (ss *session) admitSearch(pol *policy, src netip.Addr, names []pva.SearchName) bool {
	n := len(names)
	if m := pol.MaxNamesPerSearch; m > 0 {
		n = min(n, m)
	}
	if n == 0 {
		return pol.limit.Allow(src)
	}
	rep, fresh := pol.repeats.Price(src, n, func(i int) []byte { return names[i].Name }, ss.fresh)
	ss.fresh = fresh
	if !pol.limit.AllowFrac(src, (n-rep)*ratelimit.RepeatShare+rep, n*ratelimit.RepeatShare) {
		return false
	}
	pol.repeats.Remember(src, fresh)
	return true
}

// noteTwin tells the pairing about this search.
func (ss *session) noteTwin(payload []byte) {
	if ss.twin == nil {
		return
	}
	if fp, ok := ss.s.opt.Twins.Fingerprint(payload); ok {
		ss.twin.TCPSearch(fp)
	}
}

// offer queues an answer to the client's UDP search, if the connection
// has room (pvaconn.Conn.Offer).
func (ss *session) offer(b []byte) bool {
	c := ss.conn.Load()
	return c != nil && c.Offer(b)
}

// answer is the lookup+encode path: what package answer decides for the
// search q from this connection's client (one resolver lookup for the
// whole message), encoded in the connection's byte order (flags): one
// CMD_SEARCH_RESPONSE per claiming server appended to out, or pvans's
// found=0 reply at localPort when nothing was claimed and the client
// insists. payload is what q was decoded from (insight copies unclaimed
// names from it). ss.rep holds the decision, ss.batch the lookup.
func (ss *session) answer(out []byte, q *pva.Search, payload []byte, flags uint8, localPort uint16) []byte {
	s := ss.s
	req := answer.Request{Search: q, Payload: payload, Resolver: s.lookup, Client: ss.src, To: ss.src,
		Map: s.pol.Load().AddressMap, TCP: true}
	ss.rep = s.rules.Answer(&req, &ss.batch, ss.rep.Claims[:0])
	for i := range ss.rep.Claims {
		c := &ss.rep.Claims[i]
		out = answer.Append(out, flags, q.Seq, c)
		s.cnt.claims.Add(uint64(len(c.CIDs)))
		s.cnt.responses.Add(1)
	}
	if ss.rep.Negative {
		// PVXS ignores found=0 over TCP, but a MustReply search (a
		// discovery ping among them) is owed an answer.
		neg := answer.Negative(s.opt.GUID, localPort)
		out = answer.Append(out, flags, q.Seq, &neg)
		s.cnt.negative.Add(1)
	}
	return out
}

// push answers names that were waiting, on the connection they were
// searched on, without waiting for the client's next retry, as the search
// that made them wait would have been answered: "tls" only if it listed
// "tls" (g.Offer), whatever other searches the connection made.
func (ss *session) push(c *pvaconn.Conn, g Group) {
	ss.pushMu.Lock()
	defer ss.pushMu.Unlock()
	cl, ok := ss.s.claim(&g, ss.src)
	if !ok {
		return
	}
	ss.pushBuf = answer.Append(ss.pushBuf[:0], c.Flags(), ss.lastSeq.Load(), &cl)
	ss.s.cnt.claims.Add(uint64(len(cl.CIDs)))
	if c.Send(ss.pushBuf) != nil {
		ss.s.cnt.sendErrors.Add(1)
		return
	}
	ss.s.cnt.pushed.Add(1)
}

// claim is what a claim of g, answered after its search (a push), says to
// the client at client: decided as a direct answer's (answer.Rules.Claim),
// for the offer of the search that made the client wait or was told
// (g.Offer).
func (s *Server) claim(g *Group, client netip.Addr) (answer.Claim, bool) {
	return s.rules.Claim(g, g.Offer, client, s.pol.Load().AddressMap)
}

// refuseChannels answers every CID of a CREATE_CHANNEL the way PVXS refuses
// an unknown channel (docs/protocol.md, "Channel create and destroy"). A
// malformed request is ignored: the client will time out that channel.
func (ss *session) refuseChannels(c *pvaconn.Conn, h pva.Header, payload []byte) {
	r := pva.NewReader(payload, h.BigEndian(), "CMD_CREATE_CHANNEL")
	n := int(r.U16("count"))
	if !r.Failed() && n*5 > r.Remaining() {
		r.Fail("count", "count exceeds payload")
	}
	flags := c.Flags()
	w := pva.Writer{BE: flags&pva.FlagBigEndian != 0}
	var out []byte
	for i := 0; i < n && !r.Failed(); i++ {
		cid := r.U32("cid")
		r.StringBytes("name")
		if r.Failed() {
			break
		}
		w.B = w.B[:0]
		w.U32(cid)
		w.U32(0xFFFFFFFF)
		w.Status(pva.Status{Type: pva.StatusFatal, Message: "Refused to create Channel"})
		out = pva.AppendMessage(out, flags, pva.CmdCreateChannel, w.B)
		ss.s.cnt.refused.Add(1)
	}
	if len(out) > 0 && c.Send(out) != nil {
		ss.s.cnt.sendErrors.Add(1)
	}
}
