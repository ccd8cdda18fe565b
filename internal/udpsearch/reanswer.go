package udpsearch

import (
	"time"

	"github.com/pvans-project/pvans/internal/answer"
	"github.com/pvans-project/pvans/internal/resolver"
)

// Reanswer is the resolver's UDP sink for the restart fan-out
// (resolver.Resolver.SetUDPSink): it answers again, to the reply address
// d an earlier answer went to, the CIDs of g, now held by g.Server. It
// returns how many CIDs it sent or queued.
//
// Its bytes were paid from the reflection budget when the answer it
// repeats was sent (the handler's Reserve beside ToldUDP), so it is not
// charged again: whatever a spoofed search made pvans send its victim,
// answer and re-answer together stay within the ratio of that search's
// bytes. It is paced like any reply to that client (a big client's
// re-answers arrive at the pace its receive buffer takes) and goes
// through the reply queue, from the queue's timer: never on the caller's
// goroutine, which holds the resolver's locks. The access lists are
// applied as they are now (a reload may have refused that client since).
func (s *Server) Reanswer(d resolver.UDPDest, g resolver.Group) int {
	p := s.pol.Load()
	if p.Silent || !p.AnswerNames || len(g.CIDs) == 0 {
		return 0
	}
	if allow := p.ClientAllowed; allow != nil && !allow(d.To.Addr()) {
		s.st.dropDenied.Add(1)
		return 0
	}
	c, ok := s.claim(&g, d.To.Addr(), p)
	if !ok {
		return 0
	}
	n := 0
	for cids := c.CIDs; len(cids) > 0; {
		// One answer named at most DefaultMaxNamesPerSearch CIDs, so a
		// datagram of that many is never bigger than the answers whose
		// reservations pay for it.
		k := min(len(cids), DefaultMaxNamesPerSearch)
		// Sequence 0: every client matches a search response by CID alone.
		part := c
		part.CIDs = cids[:k]
		b := answer.Append(nil, replyFlags, 0, &part)
		if s.queueReply(b, d, cids[:k]) {
			n += k
		}
		cids = cids[k:]
	}
	return n
}

// queueReply books b for d in the reply queue, at the client's pace.
func (s *Server) queueReply(b []byte, d resolver.UDPDest, cids []uint32) bool {
	pc := s.pace
	if pc == nil {
		// No pacing: a queue of its own, which sends at once from its
		// timer.
		pc = s.unpaced
	}
	var wait time.Duration
	if pc.p != nil {
		w, ok := pc.p.Delay(d.To, len(cids))
		if !ok {
			s.st.dropReplyHold.Add(1)
			return false
		}
		wait = w
	}
	if !pc.q.push(b, d.To, d.From, d.Pin, wait, cids) {
		return false
	}
	s.st.responses.Add(1)
	s.st.claims.Add(uint64(len(cids)))
	return true
}
