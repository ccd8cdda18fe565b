package probe

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
)

// confirmSeq marks Confirm's TCP search.
const confirmSeq = 0x636E666D // "cnfm"

// Confirm asks the server at ep, over a TCP connection of its own, whether
// it is guid and claims names: a CMD_SEARCH over TCP with MustReply, as a
// PVXS client sends to a name server (docs/protocol.md, "Searches over TCP
// at a server"). A UDP search reply (search-through) is only a hint; this
// is the TCP exchange that lets the registry take it for everyone. done
// receives the names the endpoint claimed under guid — none if it answered
// with another GUID or named another endpoint than ep, did not answer over
// TCP (pvAccessCPP answers TCP searches over UDP; its names come from the
// listing instead) or could not be reached — exactly once, from another
// goroutine. Confirmations share the probe pool (and its per-host share)
// with probes.
func (p *Prober) Confirm(guid pva.GUID, ep netip.AddrPort, names []string, done func(confirmed []string)) {
	p.mu.Lock()
	if p.closed || len(names) == 0 {
		p.mu.Unlock()
		done(nil)
		return
	}
	if mt := p.tm.Load().maxThrough; mt > 0 && p.confirming >= mt {
		// As many checks waiting or running as search-through endpoints
		// may be known: a flood of replies is not a flood of goroutines.
		p.stats.ThroughDropped.Add(1)
		p.mu.Unlock()
		p.full.Hit("confirm", "search-through checks at their bound (probe.DefaultMaxThrough): answer not checked")
		done(nil)
		return
	}
	p.confirming++
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		defer func() { p.mu.Lock(); p.confirming--; p.mu.Unlock() }()
		release, acquired := p.sched.acquire(p.ctx, ep.Addr(), false)
		if !acquired {
			done(nil)
			return
		}
		ok := p.confirm(guid, ep, names)
		release()
		p.mu.Lock()
		if len(ok) > 0 {
			p.stats.VerifyConfirmed.Add(1)
		} else {
			p.stats.VerifyRefuted.Add(1)
		}
		p.mu.Unlock()
		if ce := p.log.Check(zap.DebugLevel, "search-through answer checked over TCP"); ce != nil {
			ce.Write(zap.Stringer("endpoint", ep), zap.Stringer("guid", guid), zap.Int("names", len(names)), zap.Int("confirmed", len(ok)))
		}
		done(ok)
	}()
}

// confirmer collects the answers to Confirm's search: PVXS claims every
// name in one reply, Phoebus core-pva's server each name in a reply of its
// own. They end at the echo sent after the search, which a server answers
// after it (or at the deadline).
type confirmer struct {
	mu   sync.Mutex
	max  int // replies kept at most: one a name (Java), one more
	got  []pva.SearchResponse
	done chan struct{} // closed at the echo
	once sync.Once
}

func (c *confirmer) Message(_ *pvaconn.Conn, h pva.Header, payload []byte) {
	switch h.Command {
	case pva.CmdEcho:
		if cid, ok := echoMarked(payload); ok && cid == confirmSeq {
			c.once.Do(func() { close(c.done) })
		}
	case pva.CmdSearchResponse:
		var m pva.SearchResponse
		if m.Decode(payload, h.BigEndian()) != nil || m.Seq != confirmSeq {
			return
		}
		m.CIDs = append([]uint32(nil), m.CIDs...) // payload is only valid during the call
		c.mu.Lock()
		if len(c.got) < c.max {
			c.got = append(c.got, m)
		}
		c.mu.Unlock()
	}
}

func (p *Prober) confirm(guid pva.GUID, ep netip.AddrPort, names []string) []string {
	tm := p.tm.Load()
	wait := within(max(4*p.opt.PingWait, 2*time.Second), tm.probeTimeout)
	ctx, cancel := context.WithTimeout(p.ctx, wait)
	defer cancel()
	c := &confirmer{done: make(chan struct{}), max: len(names) + 1}
	opt := tm.conn
	opt.EchoInterval, opt.IdleTimeout = 0, 0
	conn, err := p.opt.Dial(ctx, ep, opt, c)
	if err != nil {
		return nil
	}
	defer conn.Close()
	q := pva.Search{Seq: confirmSeq, Flags: pva.SearchMustReply | pva.SearchUnicast, Protocols: [][]byte{[]byte("tcp")}}
	for i, n := range names {
		// Counted from 1: positive as a signed int, as a Java server
		// needs (a negative CID is its "list servers" ping).
		q.Names = append(q.Names, pva.SearchName{CID: uint32(i + 1), Name: []byte(n)})
	}
	msg := pva.AppendSearch(nil, conn.Flags(), &q)
	msg = pva.AppendEcho(msg, conn.Flags(), appendEchoMark(nil, confirmSeq))
	if err := conn.Send(msg); err != nil {
		return nil
	}
	select {
	case <-c.done:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var ok []string
	seen := make([]bool, len(names))
	for _, m := range c.got {
		// The endpoint speaks only for itself: an answer naming another
		// endpoint confirms nothing here.
		if m.GUID != guid || !m.Found || (!m.Addr.IsAny() && m.Addr.Addr().Unmap() != ep.Addr().Unmap()) || (m.Port != 0 && m.Port != ep.Port()) {
			continue
		}
		for _, cid := range m.CIDs {
			if cid >= 1 && int(cid) <= len(names) && !seen[cid-1] {
				seen[cid-1] = true
				ok = append(ok, names[cid-1])
			}
		}
	}
	return ok
}
