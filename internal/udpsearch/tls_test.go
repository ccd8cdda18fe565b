package udpsearch

import (
	"net/netip"
	"testing"

	"github.com/pvans-project/pvans/internal/addrmap"
	"github.com/pvans-project/pvans/internal/pva"
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
