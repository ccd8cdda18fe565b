package tcpsearch

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/answer"
	"github.com/pvans-project/pvans/internal/pva"
)

// appendClaim is one claim of g to the client at client, decided as a
// push's for the offer off and encoded as the connection sends it; the
// older tests call it with a SearchResponse they no longer need.
func (s *Server) appendClaim(out []byte, _ *pva.SearchResponse, flags uint8, seq uint32, g *Group, off Offer, client netip.Addr) ([]byte, bool) {
	c, ok := s.rules.Claim(g, off, client, s.pol.Load().AddressMap)
	if !ok {
		return out, false
	}
	s.cnt.claims.Add(uint64(len(c.CIDs)))
	return answer.Append(out, flags, seq, &c), true
}

// fixedResolver claims every name on one endpoint as it is given (no
// registry to normalise it) and hands the push of each connection to the
// test.
type fixedResolver struct {
	ep     Endpoint
	pushes chan func(Group)
}

func (r *fixedResolver) Lookup(q []pva.SearchName, b *Batch) {
	b.Groups, b.Missing = b.Groups[:0], b.Missing[:0]
	g := Group{Server: r.ep}
	for _, n := range q {
		g.CIDs = append(g.CIDs, n.CID)
	}
	b.Groups = append(b.Groups, g)
}

func (r *fixedResolver) NewClient(_ netip.Addr, push func(Group)) Waiter {
	r.pushes <- push
	return nopWaiter{}
}

type nopWaiter struct{}

func (nopWaiter) Wait([]pva.SearchName, []int, Offer)       {}
func (nopWaiter) Told([]pva.SearchName, *Batch, int, Offer) {}
func (nopWaiter) Close()                                    {}

// The rules now shared with UDP (udpsearch's TestEmptyProtocolNamedTCPOverUDP
// and TestZeroEndpointNotNamedOverUDP) hold over TCP, for an answer and
// for a push alike: a server whose registry protocol is empty is named
// "tcp", and a zero endpoint is never named.
func TestSharedClaimRulesOverTCP(t *testing.T) {
	res := &fixedResolver{ep: Endpoint{GUID: guidA, Addr: netip.MustParseAddrPort("10.0.0.7:5075")}, pushes: make(chan func(Group), 1)}
	srv := New(Options{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}, GUID: guidN}, res)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cl := dial(t, srv.Addrs()[0])
	cl.search(3, 0, "old:pv")
	if r := cl.next(t, 5*time.Second); !r.m.Found || string(r.m.Protocol) != "tcp" || r.m.Port != 5075 {
		t.Fatalf("answer %+v, want server A named over \"tcp\"", r.m)
	}
	var push func(Group)
	select {
	case push = <-res.pushes: // the connection's waiter, made by the answer's Told
	case <-time.After(5 * time.Second):
		t.Fatal("no waiter made for the answered connection")
	}
	push(Group{Server: res.ep, CIDs: []uint32{8}, Offer: answer.TCP})
	if r := cl.next(t, 5*time.Second); !r.m.Found || string(r.m.Protocol) != "tcp" || len(r.m.CIDs) != 1 || r.m.CIDs[0] != 8 {
		t.Fatalf("push %+v, want server A named over \"tcp\"", r.m)
	}
	push(Group{Server: Endpoint{GUID: guidZ, Addr: netip.MustParseAddrPort("0.0.0.0:5075"), Protocol: "tcp"}, CIDs: []uint32{9}, Offer: answer.TCP})
	cl.none(t, 100*time.Millisecond)
	if srv.cnt.zeroEndpoint.Load() != 1 || srv.cnt.pushed.Load() != 1 {
		t.Fatalf("ZeroEndpoint %d, Pushed %d; want 1, 1", srv.cnt.zeroEndpoint.Load(), srv.cnt.pushed.Load())
	}
}
