// Package answer decides what pvans tells a client that searched, for both
// transports: the protocol filter, the lookup, insight's accounting, what
// each claim names (Rules.Claim), whether the names nobody claims wait for
// a search through, and the negative answer. udpsearch and tcpsearch only
// decode, admit, pace or queue, encode (Append) and send, as PVXS funnels
// both into one Source::onSearch: a new field of an answer is one change
// here, tested once for both.
package answer

import (
	"net/netip"

	"github.com/pvans-project/pvans/internal/addrmap"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
)

// Resolver looks up all names of one search in one go (*resolver.Resolver
// is one). It is called on a receive goroutine for every search, so it
// must not block or do I/O, and must not keep q or its Name bytes (views
// into the receive buffer). Lookup resets b itself.
type Resolver interface {
	Lookup(q []pva.SearchName, b *resolver.Batch)
}

// Observer is told about every search the resolver answered
// (*insight.Insight is one): the client, whether over TCP, the payload the
// names were decoded from, the names, the indexes of those nobody claims
// and how many were found. Called on a receive goroutine: it must not
// block and must not keep anything.
type Observer interface {
	Searched(client netip.Addr, tcp bool, payload []byte, names []pva.SearchName, missing []int, found int)
}

// Offer is the protocols a client takes a claim in; the resolver's type,
// as its waiters and remembered answers keep it for pushes and
// re-answers (Group.Offer).
type Offer = resolver.Offer

const (
	TCP = resolver.OfferTCP // plain PVAccess over TCP
	TLS = resolver.OfferTLS // Secure PVAccess
)

// Listed is the offer of a search's protocol list; names other than "tcp"
// and "tls" are no protocol pvans can name a server in.
func Listed(s *pva.Search) Offer {
	var o Offer
	for _, p := range s.Protocols {
		switch string(p) {
		case "tcp":
			o |= TCP
		case "tls":
			o |= TLS
		}
	}
	return o
}

// Request is one search from one client, as its transport decoded it.
type Request struct {
	Search *pva.Search
	// Payload is what Search was decoded from (insight takes the names it
	// keeps from it).
	Payload []byte
	// Resolver looks the names up; nil: no name is answered (none held,
	// or the transport's policy answers none), only the negative answer.
	Resolver Resolver
	// Client is who searched (insight's client); To is where the answer
	// goes, the client Endpoint.Wire names the servers for (the reply
	// address over UDP, the peer over TCP).
	Client, To netip.Addr
	Map        addrmap.Map // the address map in force (map.rules)
	// TCP: the search came over a TCP connection. It is answered whatever
	// its protocol list says, as a PVXS server on master does
	// (ServerConn::handle_SEARCH does not read it), and insight hears of
	// it as a TCP search.
	TCP bool
	// Why the names nobody claims would not wait for a search through
	// (Reply.Wait), set by the transport that knows:
	//  - Broadcast: a UDP broadcast or multicast reached the servers
	//    themselves; searching through every name a network broadcasts
	//    would only repeat it.
	//  - Own: pvans's own search heard back; not told to insight either.
	//  - Paired: the client's own TCP connection (package twin) waits for
	//    the names.
	Broadcast, Own, Paired bool
}

// Claim is what an answer tells one client of one claiming server: the
// body of one CMD_SEARCH_RESPONSE with found = 1.
type Claim struct {
	GUID     pva.GUID
	Addr     pva.Address
	Port     uint16
	Protocol string   // "tcp" or "tls": a constant, never copied per answer
	CIDs     []uint32 // a view of the group's CIDs
	Group    int      // the group's index in the Batch (what Told remembers)
}

// Reply is what one search is answered with.
type Reply struct {
	// Claims is one per claiming server, in the Batch's order, appended to
	// the scratch the caller gave.
	Claims []Claim
	// Looked is how many names were looked up (0: none: no names, no
	// usable protocol, or no resolver).
	Looked int
	// Offer is the search's: what waits (Client.Wait, WaitUDP) and what
	// is told (Told, ToldUDP) keeps it, so that a push or a re-answer is
	// decided as this answer was (a search listing "tls" alone is named
	// no plain server then either).
	Offer Offer
	// Wait: the Batch's Missing names wait for a search through, on the
	// transport's waiter (Request's Broadcast, Own, Paired say why not).
	Wait bool
	// Negative: nothing was claimed and the search insists (MustReply, a
	// discovery ping among them): pvans's own found = 0 answer (Negative)
	// is owed.
	Negative bool
}

// Counters are the decisions an answer counts, into counters each
// transport declares among its own (metrics.Counter), so each keeps its
// series.
type Counters struct {
	// NoProtocol: searches with names whose protocol list has neither
	// "tcp" nor "tls".
	NoProtocol *metrics.Counter
	// ProtocolSkipped: claims not named, the server's protocol not one
	// the client takes.
	ProtocolSkipped *metrics.Counter
	// ZeroEndpoint: claims not named, the registry had a zero address or
	// port (it would send the client back to pvans itself).
	ZeroEndpoint *metrics.Counter
	// LoopbackRewritten: claims of a server known by a loopback address
	// named to a client elsewhere as "any" (Endpoint.Wire).
	LoopbackRewritten *metrics.Counter
}

// NewCounters returns Counters of their own, exported nowhere.
func NewCounters() Counters {
	return Counters{NoProtocol: new(metrics.Counter), ProtocolSkipped: new(metrics.Counter),
		ZeroEndpoint: new(metrics.Counter), LoopbackRewritten: new(metrics.Counter)}
}

// Rules are one transport's: who hears of its searches, and its counters.
type Rules struct {
	Insight  Observer // nil: nobody
	Counters Counters
}

// Answer decides the answer to r. b is the caller's Batch, filled by the
// lookup (Told and the waiters read it; without a lookup it is left as
// it was); claims is scratch the Reply's Claims are appended to. One
// resolver lookup per search.
func (ru *Rules) Answer(r *Request, b *resolver.Batch, claims []Claim) Reply {
	s := r.Search
	off := Listed(s)
	if r.TCP {
		off |= TCP
	}
	rep := Reply{Claims: claims, Offer: off}
	if len(s.Names) > 0 && r.Resolver != nil {
		if off == 0 {
			ru.Counters.NoProtocol.Add(1)
		} else {
			rep.Looked = len(s.Names)
			r.Resolver.Lookup(s.Names, b)
			if ob := ru.Insight; ob != nil && !r.Own {
				ob.Searched(r.Client, r.TCP, r.Payload, s.Names, b.Missing, found(b))
			}
			rep.Wait = len(b.Missing) > 0 && !r.Broadcast && !r.Own && !r.Paired
			for i := range b.Groups {
				// Decided in place in the scratch: a Claim is copied
				// neither out of Claim nor into the slice.
				n := len(rep.Claims)
				if n < cap(rep.Claims) {
					rep.Claims = rep.Claims[:n+1]
				} else {
					rep.Claims = append(rep.Claims, Claim{})
				}
				if c := &rep.Claims[n]; ru.claim(c, &b.Groups[i], off, r.To, r.Map) {
					c.Group = i
				} else {
					rep.Claims = rep.Claims[:n]
				}
			}
		}
	}
	rep.Negative = len(rep.Claims) == 0 && s.MustReply()
	return rep
}

// found is how many names the lookup found.
func found(b *resolver.Batch) int {
	n := 0
	for i := range b.Groups {
		n += len(b.Groups[i].CIDs)
	}
	return n
}

// Claim decides what the claim g says to a client at to that takes off,
// under the address map m: a direct answer, a push and a re-answer alike
// (these pass g.Offer, their search's).
// A client that offers "tls" is named the server's TLS endpoint when it
// has one, never the plain one instead (Endpoint.For); a server's
// protocol the client does not take is not named ("tls" to a plain PVXS
// client would be useless to it; a registry protocol "" is "tcp"); nor is
// a zero address or port, which would tell a PVXS client to open the
// channel on pvans itself. The address and port are Endpoint.Wire's for
// the client. ok is false when nothing may be named (counted).
func (ru *Rules) Claim(g *resolver.Group, off Offer, to netip.Addr, m addrmap.Map) (c Claim, ok bool) {
	ok = ru.claim(&c, g, off, to, m)
	return c, ok
}

// claim is Claim deciding into c, every field of which it sets when it
// reports true (c may hold an earlier claim), and counting what decide
// withholds or rewrites.
func (ru *Rules) claim(c *Claim, g *resolver.Group, off Offer, to netip.Addr, m addrmap.Map) bool {
	if len(g.CIDs) == 0 {
		return false
	}
	switch decide(c, &g.Server, off, to, m) {
	case WithheldProtocol:
		ru.Counters.ProtocolSkipped.Add(1)
		return false
	case WithheldZeroEndpoint:
		ru.Counters.ZeroEndpoint.Add(1)
		return false
	}
	if c.Addr == pva.AnyIPv4 {
		ru.Counters.LoopbackRewritten.Add(1)
	}
	c.CIDs, c.Group = g.CIDs, 0
	return true
}

// decide is Claim's rule for the server ep, counting nothing: it sets c's
// GUID, address, port and protocol and returns "", or returns why nothing
// may be named (WithheldProtocol, WithheldZeroEndpoint).
func decide(c *Claim, ep *resolver.Endpoint, off Offer, to netip.Addr, m addrmap.Map) string {
	if off&TLS != 0 && ep.TLSPort != 0 {
		viaTLS, _ := ep.For(true)
		ep = &viaTLS
	}
	switch {
	case ep.Protocol == "tls" && off&TLS != 0:
		c.Protocol = "tls"
	case (ep.Protocol == "tcp" || ep.Protocol == "") && off&TCP != 0:
		c.Protocol = "tcp"
	default:
		return WithheldProtocol
	}
	if ip := ep.Addr.Addr(); !ip.IsValid() || ip.Unmap().IsUnspecified() || ep.Addr.Port() == 0 {
		return WithheldZeroEndpoint
	}
	c.Addr, c.Port = ep.Wire(to, m)
	c.GUID = ep.GUID
	return ""
}

// Negative is pvans's own answer naming no channel (found = 0): its GUID,
// address "any" (the client substitutes where the answer came from) and
// port, "tcp", as a PVXS server answers a MustReply search it claims
// nothing of.
func Negative(guid pva.GUID, port uint16) Claim {
	return Claim{GUID: guid, Addr: pva.AnyIPv4, Port: port, Protocol: "tcp"}
}

// Append appends c as a CMD_SEARCH_RESPONSE (found when it names CIDs)
// echoing the search's sequence seq, with the header flags flags, whose
// FlagBigEndian gives the byte order: the server direction, big endian,
// over UDP (as PVXS sends), the connection's over TCP.
func Append(dst []byte, flags uint8, seq uint32, c *Claim) []byte {
	return pva.AppendClaim(dst, flags, seq, c.GUID, c.Addr, c.Port, c.Protocol, c.CIDs)
}
