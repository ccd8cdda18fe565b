package daemon

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/pvans-project/pvans/internal/addrmap"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

// The API's ?client= view says what a client is really told: nothing,
// and why, where every answer withholds the claim (a server serving only
// TLS to a plain search, a zero port in the registry), as decided by
// answer.Told, and the TLS view where a search offering "tls" is told
// something else. A name the name access list refuses is told nothing;
// a server the address map (map.rules) moves is told where it maps to.
func TestAPIToldAppliesClaimRules(t *testing.T) {
	c := testConfig(t)
	c.Access.NameDeny = patterns("told:denied")
	m, err := addrmap.ParseMap([]string{"servers=10.0.0.13:5075 to=192.0.2.13:15075"})
	if err != nil {
		t.Fatal(err)
	}
	c.Map.Rules = m
	d := startDaemon(t, c)
	for _, s := range []struct {
		guid byte
		addr string
		prot string
		name string
	}{
		{0x51, "127.0.0.1:5095", "tcp", "told:plain"},
		{0x52, "10.0.0.10:5986", "tls", "told:tls-only"},
		{0x53, "10.0.0.11:0", "tcp", "told:zero-port"},
		{0x54, "10.0.0.12:5075", "tcp", "told:denied"},
		{0x55, "10.0.0.13:5075", "tcp", "told:mapped"},
	} {
		g := pva.GUID{s.guid}
		if _, err := d.Registry.UpsertServer(registry.ServerInfo{GUID: g, Addr: netip.MustParseAddrPort(s.addr), Protocol: s.prot}); err != nil {
			t.Fatal(err)
		}
		if err := d.Registry.AddNames(g, []string{s.name}, registry.SourceProbe); err != nil {
			t.Fatal(err)
		}
	}
	told := func(name, client string) httpapi.Told {
		t.Helper()
		var n httpapi.Name
		if err := json.Unmarshal([]byte(httpGet(t, d, "/v1/names/"+name+"?client="+client)), &n); err != nil || n.Told == nil {
			t.Fatalf("%s: %+v, %v", name, n, err)
		}
		return *n.Told
	}
	remote := "10.1.2.3"
	for name, want := range map[string]httpapi.Told{
		// A server known by loopback: "any" to a client elsewhere, the
		// same to a TLS search.
		"told:plain": {Client: remote, Any: true, Port: 5095, Protocol: "tcp"},
		// Named to a TLS search only.
		"told:tls-only": {Client: remote, Withheld: "protocol",
			TLS: &httpapi.Told{Client: remote, Endpoint: "10.0.0.10:5986", Port: 5986, Protocol: "tls"}},
		// Never named: it would send the client back to pvans.
		"told:zero-port": {Client: remote, Withheld: "zero_endpoint"},
		// Refused by access.name_deny before any claim.
		"told:denied": {Client: remote, Withheld: "name_policy"},
		// The address map in force (map.rules).
		"told:mapped": {Client: remote, Endpoint: "192.0.2.13:15075", Port: 15075, Protocol: "tcp"},
	} {
		got := told(name, remote)
		if got.TLS != nil && want.TLS != nil && *got.TLS == *want.TLS {
			got.TLS = want.TLS
		}
		if got != want {
			t.Errorf("%s: told %+v (tls %+v), want %+v (tls %+v)", name, got, got.TLS, want, want.TLS)
		}
	}
}
