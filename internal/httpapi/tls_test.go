package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

// TestTLSEndpointShown: a server's TLS endpoint is in /v1/servers, in
// /v1/names/{name} (with what a TLS client is told, through the same
// rules as the plain endpoint) and on the status page; a server without
// one shows none.
func TestTLSEndpointShown(t *testing.T) {
	tlsEP := netip.MustParseAddrPort("127.0.0.1:5086")
	reg := &fakeReg{
		servers: []registry.ServerInfo{
			{GUID: g1, Addr: a1, Protocol: "tcp", TLS: tlsEP, ProbeState: registry.ProbeListed, Verified: true},
			{GUID: g2, Addr: a2, Protocol: "tcp", ProbeState: registry.ProbeListed, Verified: true},
		},
		names: []registry.NameInfo{{Name: "sec:pv", GUID: g1, Addr: a1, TLS: tlsEP, How: registry.SourceProbe}},
	}
	told := func(name string, client netip.Addr, tls bool) Claimed {
		if tls {
			return Claimed{Addr: pva.AddressFrom(netip.MustParseAddr("192.0.2.1")), Port: tlsEP.Port() + 10000, Protocol: "tls"}
		}
		return Claimed{Addr: pva.AddressFrom(netip.MustParseAddr("192.0.2.1")), Port: a1.Port() + 10000, Protocol: "tcp"}
	}
	srv := httptest.NewServer(Handler(Options{Registry: reg, Told: told, Version: "test"}))
	defer srv.Close()

	var ss []Server
	if err := json.Unmarshal([]byte(get(t, srv.URL+"/v1/servers", 200)), &ss); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range ss {
		got[s.GUID] = s.TLSEndpoint
	}
	if got[g1.String()] != tlsEP.String() || got[g2.String()] != "" {
		t.Fatalf("servers' TLS endpoints %v", got)
	}
	var n Name
	if err := json.Unmarshal([]byte(get(t, srv.URL+"/v1/names/sec:pv?client=10.0.0.1", 200)), &n); err != nil {
		t.Fatal(err)
	}
	if n.TLS != tlsEP.String() || n.Told == nil || n.Told.Endpoint != "192.0.2.1:15075" ||
		n.Told.TLS == nil || n.Told.TLS.Endpoint != "192.0.2.1:15086" {
		t.Fatalf("name %+v told %+v", n, n.Told)
	}
	if page := get(t, srv.URL+"/", 200); !strings.Contains(page, "tls "+tlsEP.String()) {
		t.Fatal("status page does not show the TLS endpoint")
	}
}
