package udpsearch

import (
	"net/netip"
	"testing"

	"github.com/pvans-project/pvans/internal/addrmap"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/resolver"
)

// TestTLSNeverDowngradedOverUDP: a UDP search that lists "tls" (anywhere,
// as PVXS's UDP rule reads it) is answered with the server's TLS endpoint
// and "tls"; one that does not gets the plain endpoint and "tcp"; a
// server known to serve TLS only is not offered to a plain client; a
// server without a TLS endpoint answers TLS clients with "tcp" as before.
// map.rules apply to the TLS endpoint too.
func TestTLSNeverDowngradedOverUDP(t *testing.T) {
	gT, gO, gP := pva.GUID{0x7}, pva.GUID{0x8}, pva.GUID{0x9}
	res := newMapResolver(map[string]resolver.Endpoint{
		"sec:pv":   {GUID: gT, Addr: netip.MustParseAddrPort("10.0.0.20:5075"), Protocol: "tcp", TLSPort: 5076},
		"only:pv":  {GUID: gO, Addr: netip.MustParseAddrPort("10.0.0.21:5076"), Protocol: "tls"},
		"plain:pv": {GUID: gP, Addr: netip.MustParseAddrPort("10.0.0.22:5075"), Protocol: "tcp"},
	})
	m, err := addrmap.ParseMap([]string{"servers=10.0.0.20 to=192.0.2.20 ports=5075:15075,5076:15076"})
	if err != nil {
		t.Fatal(err)
	}
	src := netip.MustParseAddrPort("10.0.0.9:5555")
	type ans struct {
		port  uint16
		proto string
	}
	for _, c := range []struct {
		name   string
		protos []string
		want   map[pva.GUID]ans
	}{
		{"tls first", []string{"tls", "tcp"}, map[pva.GUID]ans{gT: {15076, "tls"}, gO: {5076, "tls"}, gP: {5075, "tcp"}}},
		{"tls second", []string{"tcp", "tls"}, map[pva.GUID]ans{gT: {15076, "tls"}, gO: {5076, "tls"}, gP: {5075, "tcp"}}},
		{"plain", []string{"tcp"}, map[pva.GUID]ans{gT: {15075, "tcp"}, gP: {5075, "tcp"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := &recSender{}
			h, _ := testHandler(t, Options{AnswerNames: true, GUID: ownGUID, TCPPort: 5075, Resolver: res, AddressMap: m}, out)
			h.handle(&datagram{b: searchMsg(0, netip.Addr{}, 40000, c.protos, "sec:pv", "only:pv", "plain:pv"), src: src, dst: ipEthBc, ifIndex: 2})
			got := map[pva.GUID]ans{}
			for _, r := range out.replies {
				_, m := decodeResponse(t, r.b)
				got[m.GUID] = ans{m.Port, string(m.Protocol)}
			}
			if len(got) != len(c.want) {
				t.Fatalf("answers %v, want %v", got, c.want)
			}
			for g, w := range c.want {
				if got[g] != w {
					t.Errorf("%v: %v, want %v", g, got[g], w)
				}
			}
		})
	}
}

// nopSearcher lets the resolver keep UDP searchers' waiters (it keeps
// none without a Searcher) and searches nothing.
type nopSearcher struct{}

func (nopSearcher) Want(string, bool) {}
func (nopSearcher) Drop(string, bool) {}

// TestTLSOnlyClientNotPushedOrReansweredPlain: a UDP search that lists
// "tls" alone is never named a plain "tcp" server directly (it takes
// no TCP), and a push or a re-answer after a restart is decided as that
// direct answer: the waiter and the remembered answer keep the search's
// whole offer, not only whether it listed "tls" (which read back as
// "tls" and "tcp" named the plain server to it). A search listing both
// is pushed and re-answered the plain server over "tcp", as it is
// answered directly.
func TestTLSOnlyClientNotPushedOrReansweredPlain(t *testing.T) {
	for _, c := range []struct {
		protos []string
		named  bool // a plain server may be named to it
	}{{[]string{"tls"}, false}, {[]string{"tls", "tcp"}, true}, {[]string{"tcp"}, true}} {
		reg := registry.New(registry.Options{})
		var pushed []resolver.Group
		res := resolver.New(reg, resolver.Options{PushUDP: func(_ netip.AddrPort, g resolver.Group) { pushed = append(pushed, g) }})
		t.Cleanup(res.Close)
		res.SetSearcher(nopSearcher{})
		srv := New(Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true})
		t.Cleanup(func() { srv.Close() })
		reanswered := 0
		res.SetUDPSink(func(d resolver.UDPDest, g resolver.Group) int {
			n := srv.Reanswer(d, g)
			reanswered += n
			return n
		})
		// A server serving TLS holds "sec:pv"; nobody holds "late:pv".
		sec := netip.MustParseAddrPort("10.0.0.20:5075")
		if _, err := reg.Listed(registry.ServerInfo{GUID: pva.GUID{0x7}, Addr: sec, TLS: netip.AddrPortFrom(sec.Addr(), 5076)}, []string{"sec:pv"}, registry.SourceProbe); err != nil {
			t.Fatal(err)
		}
		out := &recSender{}
		h, _ := testHandler(t, Options{AnswerNames: true, Resolver: res, GUID: ownGUID, TCPPort: 5075}, out)
		src := netip.MustParseAddrPort("10.0.0.9:5555")
		h.handle(&datagram{b: searchMsg(pva.SearchUnicast, netip.Addr{}, 40000, c.protos, "sec:pv", "late:pv"), src: src, dst: ipEth, ifIndex: 2})
		if len(out.replies) != 1 {
			t.Fatalf("%v: %d direct answers, want sec:pv's", c.protos, len(out.replies))
		}
		// "late:pv" appears on a plain server (listed: it has no TLS).
		plain := netip.MustParseAddrPort("10.0.0.22:5075")
		if _, err := reg.Listed(registry.ServerInfo{GUID: pva.GUID{0x9}, Addr: plain}, []string{"late:pv"}, registry.SourceProbe); err != nil {
			t.Fatal(err)
		}
		if len(pushed) != 1 {
			t.Fatalf("%v: %d pushes, want late:pv's group", c.protos, len(pushed))
		}
		if cl, ok := srv.claim(&pushed[0], src.Addr(), srv.pol.Load()); ok != c.named || (ok && cl.Protocol != "tcp") {
			t.Errorf("%v: push names %+v (%v), want named %v", c.protos, cl, ok, c.named)
		}
		// The TLS server restarts without TLS: a new instance at its
		// endpoint lists "sec:pv" with no TLS endpoint.
		reg.RemoveServer(pva.GUID{0x7})
		if _, err := reg.Listed(registry.ServerInfo{GUID: pva.GUID{0x8}, Addr: sec}, []string{"sec:pv"}, registry.SourceProbe); err != nil {
			t.Fatal(err)
		}
		if (reanswered == 1) != c.named {
			t.Errorf("%v: re-answered %d CIDs naming a plain server, want named %v", c.protos, reanswered, c.named)
		}
	}
}
