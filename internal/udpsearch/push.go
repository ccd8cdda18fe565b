package udpsearch

import (
	"net/netip"

	"github.com/pvans-project/pvans/internal/answer"
	"github.com/pvans-project/pvans/internal/resolver"
)

// PushAnswer answers a client that searched over UDP for names nobody had
// listed, once pvans's search through found them (resolver.Options.PushUDP):
// a CMD_SEARCH_RESPONSE for g's CIDs to its reply socket to, without
// waiting for its next search. Every PVA client takes a reply for a CID it
// is still searching whenever it comes (docs/protocol.md). The reply
// address came in a datagram anyone can forge, so the push is charged to
// the same reflection account as the answers to the searches that named
// it: it is sent only within the reflection ratio (DefaultReflectionRatio) of the bytes
// those searches brought (beyond, the client's next search is answered
// instead). Called with the resolver's lock held: it sends at once, from
// the search port, unpaced (a push is a few datagrams, not a client's
// burst), and waits only if the socket's send buffer is full, as every
// reply from it does.
func (s *Server) PushAnswer(to netip.AddrPort, g resolver.Group) {
	p := s.pol.Load()
	if p.Silent || !p.AnswerNames || len(g.CIDs) == 0 {
		return
	}
	// The access list as it is now: a reload may have refused the client
	// since it started waiting (Reanswer does the same).
	if allow := p.ClientAllowed; allow != nil && !allow(to.Addr()) {
		s.st.dropDenied.Add(1)
		return
	}
	f := s.famOf(to.Addr())
	if f == nil || f.search == nil {
		return
	}
	c, ok := s.claim(&g, to.Addr(), p)
	if !ok {
		return
	}
	var b []byte
	for cids := c.CIDs; len(cids) > 0; {
		n := min(len(cids), pushCIDs)
		part := c
		part.CIDs = cids[:n]
		b = answer.Append(b[:0], replyFlags, 0, &part)
		cids = cids[n:]
		if !p.refl.Reply(to.Addr(), len(b)) {
			s.st.reflectionCapped.Add(1)
			return
		}
		if _, err := f.search.WriteToUDPAddrPort(b, to); err != nil {
			s.st.sendErrors.Add(1)
			return
		}
		s.st.responses.Add(1)
		s.st.claims.Add(uint64(n))
		s.st.repliesPushed.Add(1)
	}
}

// claim is what a claim of g, answered after its search (a push, a
// re-answer), says to the reply socket to under the policy p: decided as
// a direct answer's (answer.Rules.Claim), for the offer of the search
// that made the client wait or was told (g.Offer).
func (s *Server) claim(g *resolver.Group, to netip.Addr, p *policy) (answer.Claim, bool) {
	ru := answer.Rules{Counters: s.st.answer()}
	return ru.Claim(g, g.Offer, to, p.AddressMap)
}

// pushCIDs is the most CIDs one pushed datagram names: 256 × 4 bytes and
// the response's ~50 fit one 1500-byte Ethernet frame, as a server's
// answer to one search datagram does, where a listing resolving thousands
// of a client's names at once would otherwise make one fragmented
// datagram (or one over UDP's 64 KiB).
const pushCIDs = 256
