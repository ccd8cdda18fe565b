package udpsearch

import (
	"net/netip"
	"testing"
)

// A trusted relay speaks for other hosts only: an address of this host
// (which reaches every service bound to the wildcard, as loopback would),
// its networks' broadcast addresses, link-local, loopback, multicast and
// unspecified addresses are refused.
func TestRelayableNeverNamesThisHost(t *testing.T) {
	tab := newIfaceTable([]Interface{
		{Index: 1, Name: "lo", Up: true, Loopback: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
		{Index: 2, Name: "eth0", Up: true, Broadcast: true, Prefixes: []netip.Prefix{
			netip.MustParsePrefix("10.213.0.1/24"), netip.MustParsePrefix("2001:db8::1/64")}},
	})
	for _, c := range []struct {
		a  string
		ok bool
	}{
		{"10.213.0.7", true}, {"192.0.2.5", true}, {"2001:db8::7", true},
		{"10.213.0.1", false}, {"::ffff:10.213.0.1", false}, {"2001:db8::1", false}, // this host
		{"10.213.0.255", false}, {"255.255.255.255", false}, // broadcast
		{"127.0.0.1", false}, {"127.9.9.9", false}, {"::1", false},
		{"169.254.3.4", false}, {"fe80::1", false},
		{"224.0.0.1", false}, {"ff02::1", false}, {"0.0.0.0", false}, {"::", false},
	} {
		if got := relayable(tab, netip.MustParseAddr(c.a)); got != c.ok {
			t.Errorf("relayable(%s) = %v, want %v", c.a, got, c.ok)
		}
	}
}
