package addrmap

import (
	"net/netip"
	"strings"
	"testing"
)

func mustMap(t *testing.T, items ...string) Map {
	t.Helper()
	m, err := ParseMap(items)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestApply(t *testing.T) {
	m := mustMap(t,
		// One container published on its own port: an exact endpoint.
		"servers=172.17.0.9:5075 except_clients=172.17.0.0/16 to=10.0.0.5:25075",
		// The rest of the bridge: the host address and a port table.
		"servers=172.17.0.0/16;except_clients=172.17.0.0/16;to=10.0.0.5;ports=5075:15075,5085:15085",
		// A routed IPv6 prefix, only for one client network, same ports.
		"servers=fd00:1::/64 clients=2001:db8::/32 to=2001:db8::5",
	)
	cases := []struct {
		server, client, want string
		mapped               bool
	}{
		{"172.17.0.5:5075", "10.1.2.3", "10.0.0.5:15075", true},
		{"172.17.0.6:5085", "192.168.1.1", "10.0.0.5:15085", true},
		{"172.17.0.9:5075", "10.1.2.3", "10.0.0.5:25075", true},                 // the exact rule comes first
		{"172.17.0.5:5075", "172.17.0.3", "172.17.0.5:5075", false},             // inside: the real endpoint
		{"172.17.0.5:5095", "10.1.2.3", "172.17.0.5:5095", false},               // port not published
		{"172.18.0.5:5075", "10.1.2.3", "172.18.0.5:5075", false},               // another network
		{"[::ffff:172.17.0.5]:5075", "::ffff:10.1.2.3", "10.0.0.5:15075", true}, // mapped forms are IPv4
		{"[fd00:1::7]:5075", "2001:db8::9", "[2001:db8::5]:5075", true},
		{"[fd00:1::7]:5075", "2001:db9::9", "[fd00:1::7]:5075", false},
	}
	for _, tc := range cases {
		got, ok := m.Apply(netip.MustParseAddrPort(tc.server), netip.MustParseAddr(tc.client))
		if got.String() != tc.want || ok != tc.mapped {
			t.Errorf("Apply(%s, %s) = %s, %v; want %s, %v", tc.server, tc.client, got, ok, tc.want, tc.mapped)
		}
	}
	if got, ok := Map(nil).Apply(netip.MustParseAddrPort("172.17.0.5:5075"), netip.MustParseAddr("10.1.2.3")); ok || got.String() != "172.17.0.5:5075" {
		t.Errorf("empty map: %s %v", got, ok)
	}
}

func TestParse(t *testing.T) {
	r, err := Parse(" servers=172.17.0.5/16 ;  to=[2001:db8::5]:99 ")
	if err != nil {
		t.Fatal(err)
	}
	if r.String() != "servers=172.17.0.5/16;to=[2001:db8::5]:99" || r.Servers[0].String() != "172.17.0.0/16" || r.ToPort != 99 {
		t.Errorf("parsed %+v (%s)", r, r)
	}
	if again, err := Parse(r.String()); err != nil || again.String() != r.String() {
		t.Errorf("round trip: %v %v", again, err)
	}
	bad := []struct{ in, why string }{
		{"", "empty rule"},
		{"to=10.0.0.5", "servers= is required"},
		{"servers=172.17.0.0/16", "to= or ports= is required"},
		{"servers=172.17.0.0/16 to=10.0.0.5:1 ports=1:2", "exclude each other"},
		{"servers=172.17.0.0/16 to=10.0.0.5 to=10.0.0.6", "given twice"},
		{"servers=172.17.0.0/33 to=10.0.0.5", "not a CIDR prefix"},
		{"servers=host to=10.0.0.5", "not an address or CIDR prefix"},
		{"servers=10.0.0.1:0 to=10.0.0.5", "with a port and no zone"},
		{"servers=10.0.0.0/8 to=0.0.0.0", "cannot be named"},
		{"servers=10.0.0.0/8 to=239.1.1.1", "cannot be named"},
		{"servers=10.0.0.0/8 to=name", "not an address"},
		{"servers=10.0.0.0/8 ports=5075", "want real:published"},
		{"servers=10.0.0.0/8 ports=5075:0", "not a port"},
		{"servers=10.0.0.0/8 ports=5075:1,5075:2", "mapped twice"},
		{"servers=10.0.0.0/8 clients=x to=10.0.0.5", "not an address"},
		{"servers=10.0.0.0/8 except_clients=::ffff:1.2.3.4/8 to=10.0.0.5", "shorter than /96"},
		{"servers=10.0.0.0/8 via=10.0.0.5", "unknown key"},
		{"servers 10.0.0.0/8", "want key=value"},
	}
	for _, tc := range bad {
		if _, err := Parse(tc.in); err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("Parse(%q) error %v, want %q", tc.in, err, tc.why)
		}
	}
}

func BenchmarkApplyNoMatch(b *testing.B) {
	m, _ := ParseMap([]string{"servers=172.17.0.0/16 except_clients=172.17.0.0/16 to=10.0.0.5 ports=5075:15075"})
	s, c := netip.MustParseAddrPort("10.9.0.5:5075"), netip.MustParseAddr("10.1.2.3")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := m.Apply(s, c); ok {
			b.Fatal("matched")
		}
	}
}

// A non-routed gateway: IOCs that share port 5075 at different addresses,
// each published on its own port, in one rule.
func TestPortsByEndpoint(t *testing.T) {
	m := mustMap(t, "servers=10.1.0.0/16 except_clients=10.1.0.0/16 to=10.2.0.5 ports=10.1.0.5:5075:15075,10.1.0.6:5075:16075,[fd00::6]:5075:17075,5085:15085")
	for _, tc := range []struct {
		server, want string
		mapped       bool
	}{
		{"10.1.0.5:5075", "10.2.0.5:15075", true},
		{"10.1.0.6:5075", "10.2.0.5:16075", true},
		{"[::ffff:10.1.0.6]:5075", "10.2.0.5:16075", true},
		{"10.1.0.7:5085", "10.2.0.5:15085", true}, // the port table still serves the rest
		{"10.1.0.7:5075", "10.1.0.7:5075", false}, // an endpoint not published
	} {
		got, ok := m.Apply(netip.MustParseAddrPort(tc.server), netip.MustParseAddr("10.3.0.9"))
		if got.String() != tc.want || ok != tc.mapped {
			t.Errorf("Apply(%s) = %s, %v; want %s, %v", tc.server, got, ok, tc.want, tc.mapped)
		}
	}
	for _, bad := range []string{
		"servers=10.1.0.0/16 to=10.2.0.5 ports=10.1.0.5:5075:15075,10.1.0.5:5075:16075", // twice
		"servers=10.1.0.0/16 to=10.2.0.5 ports=10.1.0.5:0:15075",
		"servers=10.1.0.0/16 to=10.2.0.5 ports=10.1.0.5:5075:0",
		"servers=10.1.0.0/16 to=10.2.0.5 ports=10.1.0.5:15075", // an address is no port
	} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) took it", bad)
		}
	}
}
