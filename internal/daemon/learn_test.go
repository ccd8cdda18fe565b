package daemon

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/pvans-project/pvans/internal/udpsearch"
)

// udp.learn_interfaces names where servers are learned, in place of
// pva.interfaces: a gateway host serves one leg and learns on the other.
func TestLearnFrom(t *testing.T) {
	a := netip.MustParseAddr
	ioc, cli, wild := a("10.77.0.1"), a("10.78.0.1"), netip.IPv4Unspecified()
	for _, c := range []struct {
		name          string
		served, learn []netip.Addr
		want          []netip.Addr
	}{
		{"served alone", []netip.Addr{ioc}, nil, []netip.Addr{ioc}},
		{"learn in place of served", []netip.Addr{cli}, []netip.Addr{ioc}, []netip.Addr{ioc}},
		{"learn all", []netip.Addr{cli}, []netip.Addr{wild}, nil},
		{"served wildcard", []netip.Addr{wild}, nil, nil},
		{"served wildcard, learn one leg", []netip.Addr{wild}, []netip.Addr{ioc}, []netip.Addr{ioc}},
	} {
		if got := learnFrom(c.served, c.learn); !slices.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%s: learnFrom(%v, %v) = %v, want %v", c.name, c.served, c.learn, got, c.want)
		}
	}
	// The automatic destinations follow the learn side.
	ifs := []udpsearch.Interface{
		{Index: 1, Name: "lo", Up: true, Loopback: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
		{Index: 2, Name: "ioc", Up: true, Broadcast: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.77.0.1/24")}},
		{Index: 3, Name: "cli", Up: true, Broadcast: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.78.0.1/24")}},
	}
	got := udpsearch.BroadcastAddrList(udpsearch.Holding(ifs, learnFrom([]netip.Addr{cli}, []netip.Addr{ioc})), 5076)
	if want := []netip.AddrPort{netip.MustParseAddrPort("10.77.0.255:5076")}; !slices.Equal(got, want) {
		t.Errorf("automatic destinations learning on the IOC leg: %v, want %v", got, want)
	}
	if got := udpsearch.BroadcastAddrList(udpsearch.Holding(ifs, nil), 5076); len(got) != 2 {
		t.Errorf("automatic destinations learning everywhere: %v, want both legs", got)
	}
}
