package tcpsearch

import (
	"net/netip"

	"github.com/pvans-project/pvans/internal/answer"
	"github.com/pvans-project/pvans/internal/pva"
)

// appendClaim is one claim of g to the client at client, decided as a
// push's (answer.Waited: tlsOK says the search listed "tls") and encoded
// as the connection sends it; the older tests call it with a
// SearchResponse they no longer need.
func (s *Server) appendClaim(out []byte, _ *pva.SearchResponse, flags uint8, seq uint32, g *Group, tlsOK bool, client netip.Addr) ([]byte, bool) {
	c, ok := s.rules.Claim(g, answer.Waited(tlsOK), client, s.pol.Load().AddressMap)
	if !ok {
		return out, false
	}
	s.cnt.claims.Add(uint64(len(c.CIDs)))
	return answer.Append(out, flags, seq, &c), true
}
