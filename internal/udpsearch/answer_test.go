package udpsearch

import (
	"net/netip"
	"testing"

	"github.com/pvans-project/pvans/internal/answer"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
)

// appendResponse is a UDP answer as the handler sends it (replyFlags,
// answer.Append): what the tests compare with and send as servers' replies.
func appendResponse(dst []byte, guid pva.GUID, seq uint32, addr pva.Address, port uint16, proto string, cids []uint32) []byte {
	return answer.Append(dst, replyFlags, seq, &answer.Claim{GUID: guid, Addr: addr, Port: port, Protocol: proto, CIDs: cids})
}

// A registry endpoint with a zero address or port is never named over
// UDP, as over TCP (tcpsearch's TestZeroEndpointSkipped): it would tell
// the client to open the channel on pvans itself. The search gets the
// negative answer its MustReply asks for.
func TestZeroEndpointNotNamedOverUDP(t *testing.T) {
	zero := resolver.Endpoint{GUID: guidA, Addr: netip.MustParseAddrPort("0.0.0.0:5075"), Protocol: "tcp"}
	noPort := resolver.Endpoint{GUID: guidB, Addr: netip.MustParseAddrPort("10.0.0.7:0"), Protocol: "tcp"}
	res := newMapResolver(map[string]resolver.Endpoint{"zero:pv": zero, "noport:pv": noPort})
	out := &recSender{}
	h, st := testHandler(t, Options{AnswerNames: true, Resolver: res, GUID: ownGUID, TCPPort: 5075}, out)
	msg := searchMsg(pva.SearchMustReply, netip.Addr{}, 40000, []string{"tcp"}, "zero:pv", "noport:pv")
	h.handle(&datagram{b: msg, src: netip.MustParseAddrPort("10.0.0.9:5555"), dst: ipEthBc, ifIndex: 2})
	if len(out.replies) != 1 {
		t.Fatalf("%d replies, want the negative answer alone", len(out.replies))
	}
	if _, m := decodeResponse(t, out.replies[0].b); m.Found || m.GUID != ownGUID || len(m.CIDs) != 0 {
		t.Fatalf("a zero endpoint named: %+v", m)
	}
	if st.zeroEndpoint.Load() != 2 || st.claims.Load() != 0 {
		t.Fatalf("ZeroEndpoint %d, Claims %d; want 2, 0", st.zeroEndpoint.Load(), st.claims.Load())
	}
}

// A re-answer after a restart is decided as a direct answer: a zero
// endpoint is not named either.
func TestReanswerRefusesZeroEndpoint(t *testing.T) {
	zero := resolver.Endpoint{GUID: guidA, Addr: netip.MustParseAddrPort("0.0.0.0:5075"), Protocol: "tcp"}
	srv := New(Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true})
	defer srv.Close()
	d := resolver.UDPDest{To: netip.MustParseAddrPort("10.0.0.9:40000")}
	if n := srv.Reanswer(d, resolver.Group{Server: zero, CIDs: []uint32{1, 2}, Offer: resolver.OfferTCP}); n != 0 {
		t.Fatalf("re-answered %d CIDs naming 0.0.0.0", n)
	}
	if n := srv.Reanswer(d, resolver.Group{Server: srvA, CIDs: []uint32{1, 2}, Offer: resolver.OfferTCP}); n != 2 {
		t.Fatalf("re-answered %d CIDs naming %v, want 2", n, srvA.Addr)
	}
}

// A server whose registry protocol is empty is named "tcp" over UDP, as
// over TCP: the UDP answer used to skip it (the client lists no "").
func TestEmptyProtocolNamedTCPOverUDP(t *testing.T) {
	ep := resolver.Endpoint{GUID: guidA, Addr: netip.MustParseAddrPort("10.0.0.7:5075")}
	out := &recSender{}
	h, _ := testHandler(t, Options{AnswerNames: true, Resolver: newMapResolver(map[string]resolver.Endpoint{"old:pv": ep})}, out)
	msg := searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "old:pv")
	h.handle(&datagram{b: msg, src: netip.MustParseAddrPort("10.0.0.9:5555"), dst: ipEthBc, ifIndex: 2})
	if len(out.replies) != 1 {
		t.Fatalf("%d replies, want 1", len(out.replies))
	}
	if _, m := decodeResponse(t, out.replies[0].b); !m.Found || string(m.Protocol) != "tcp" || m.Port != 5075 || len(m.CIDs) != 1 {
		t.Fatalf("answer %+v, want server A named over \"tcp\"", m)
	}
}
