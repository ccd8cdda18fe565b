package answer

import (
	"net/netip"
	"testing"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
)

// Told names what a direct answer names, and says why where the answer
// names nothing, with the withheld counters' reasons.
func TestToldAsAnswered(t *testing.T) {
	for _, e := range []resolver.Endpoint{
		{GUID: guidS, Addr: netip.MustParseAddrPort("10.1.2.3:5075"), TLSPort: 5076, Protocol: "tcp"},
		{GUID: guidS, Addr: netip.MustParseAddrPort("10.1.2.3:5076"), Protocol: "tls"},
		{GUID: guidS, Addr: netip.MustParseAddrPort("10.1.2.3:5075")},
		{GUID: guidS, Addr: netip.MustParseAddrPort("127.0.0.1:5075"), Protocol: "tcp"},
		{GUID: guidS, Addr: netip.MustParseAddrPort("0.0.0.0:5075"), Protocol: "tcp"},
		{GUID: guidS, Addr: netip.MustParseAddrPort("10.1.2.3:0"), Protocol: "tcp"},
	} {
		for _, protos := range [][]string{{"tcp"}, {"tls", "tcp"}, {"tls"}} {
			ru := Rules{Counters: NewCounters()}
			var b resolver.Batch
			rep := ru.Answer(&Request{Search: search(0, protos, "held:pv"), To: remote,
				Resolver: &oneServer{ep: e, held: map[string]bool{"held:pv": true}}}, &b, nil)
			c, withheld := Told(e, rep.Offer, remote, nil)
			var want string
			switch {
			case ru.Counters.ZeroEndpoint.Load() == 1:
				want = WithheldZeroEndpoint
			case ru.Counters.ProtocolSkipped.Load() == 1:
				want = WithheldProtocol
			}
			if withheld != want || (want == "") != (len(rep.Claims) == 1) ||
				(want == "" && (c.Addr != rep.Claims[0].Addr || c.Port != rep.Claims[0].Port || c.Protocol != rep.Claims[0].Protocol)) {
				t.Errorf("%v %v: told %+v withheld %q; answered %+v", e, protos, c, withheld, rep.Claims)
			}
		}
	}
	// The cases spelt out.
	if _, w := Told(resolver.Endpoint{Addr: netip.MustParseAddrPort("10.1.2.3:0"), Protocol: "tcp"}, TCP, remote, nil); w != "zero_endpoint" {
		t.Errorf("zero port: withheld %q", w)
	}
	if _, w := Told(resolver.Endpoint{Addr: netip.MustParseAddrPort("10.1.2.3:5076"), Protocol: "tls"}, TCP, remote, nil); w != "protocol" {
		t.Errorf("TLS only to a plain search: withheld %q", w)
	}
	if c, w := Told(resolver.Endpoint{Addr: netip.MustParseAddrPort("127.0.0.1:5075"), Protocol: "tcp"}, TCP, remote, nil); w != "" || c.Addr != pva.AnyIPv4 || c.Port != 5075 {
		t.Errorf("loopback to a remote client: %+v %q", c, w)
	}
}
