package tcpsearch

import (
	"net/netip"
	"testing"

	"github.com/pvans-project/pvans/internal/answer"
	"github.com/pvans-project/pvans/internal/pva"
)

// A server known by a loopback address is named to a remote client as
// "any" + its port (the client substitutes the name server's address), and
// as itself to a client on this host; other servers are named as they are.
func TestLoopbackServerNamedToRemoteClients(t *testing.T) {
	s := New(Options{}, nil)
	cases := []struct {
		server   string
		client   string
		wantAddr pva.Address
	}{
		{"127.0.0.1:37445", "10.9.9.9", pva.AnyIPv4},
		{"127.0.0.1:37445", "127.0.0.1", pva.AddressFrom(netip.MustParseAddr("127.0.0.1"))},
		{"10.1.2.3:5075", "10.9.9.9", pva.AddressFrom(netip.MustParseAddr("10.1.2.3"))},
		{"10.1.2.3:5075", "127.0.0.1", pva.AddressFrom(netip.MustParseAddr("10.1.2.3"))},
	}
	for _, c := range cases {
		ep := netip.MustParseAddrPort(c.server)
		g := Group{Server: Endpoint{GUID: pva.GUID{1}, Addr: ep, Protocol: "tcp"}, CIDs: []uint32{7}}
		var m pva.SearchResponse
		out, ok := s.appendClaim(nil, &m, pva.FlagServer, pva.SearchSeqFind, &g, answer.TCP, netip.MustParseAddr(c.client))
		if !ok {
			t.Fatalf("%v: not answered", c)
		}
		h, payload, _, err := pva.SplitMessage(out)
		if err != nil {
			t.Fatal(err)
		}
		var got pva.SearchResponse
		if err := got.Decode(payload, h.BigEndian()); err != nil {
			t.Fatal(err)
		}
		if got.Addr != c.wantAddr || got.Port != ep.Port() || got.GUID != g.Server.GUID || !got.Found {
			t.Errorf("server %s, client %s: got %s:%d, want %s:%d", c.server, c.client, got.Addr, got.Port, c.wantAddr, ep.Port())
		}
	}
	if n := s.cnt.loopbackRewritten.Load(); n != 1 {
		t.Fatalf("LoopbackRewritten = %d, want 1", n)
	}
}
