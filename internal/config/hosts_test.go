package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// Host names written in the followed lists are kept beside the address
// they had at load, so the daemon can resolve them again; addresses are
// not names.
func TestHostNamesKept(t *testing.T) {
	env := map[string]string{
		"EPICS_PVA_ADDR_LIST":    "myhost 10.9.9.255",
		"EPICS_PVA_NAME_SERVERS": "myhost:5099 10.0.0.1",
	}
	c, err := Load(LoadOptions{
		Env:     func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Flags:   map[string]string{"static-servers": "myhost 10.0.0.2", "relay-to": "otherhost"},
		Resolve: func(h string) ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("10.1.1.7")}, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.HostNames(); !slices.Equal(got, []string{"myhost", "otherhost"}) {
		t.Errorf("HostNames = %v", got)
	}
	if e := c.PVA.AddrList; len(e) != 2 || e[0].Host != "myhost" || e[0].AddrPort != netip.MustParseAddrPort("10.1.1.7:5076") || e[1].Host != "" {
		t.Errorf("addr_list entries %+v", e)
	}
	if e := c.Static.ServerEntries; len(e) != 2 || e[0].Host != "myhost" || e[0].Port() != 5075 || e[1].Host != "" {
		t.Errorf("static.servers entries %+v", e)
	}
	if s := c.Static.Servers; !slices.Equal(s, []netip.AddrPort{netip.MustParseAddrPort("10.1.1.7:5075"), netip.MustParseAddrPort("10.0.0.2:5075")}) {
		t.Errorf("static.servers %v", s)
	}
	if e := c.PVA.NameServerEntries; len(e) != 2 || e[0].Host != "myhost" || e[0].Port() != 5099 {
		t.Errorf("name_servers entries %+v", e)
	}
	if e := c.Relay.To; len(e) != 1 || e[0].Host != "otherhost" || e[0].Port() != 5076 {
		t.Errorf("relay.to %+v", e)
	}
	// A name and an address equal at load are printed once.
	c2, err := Load(LoadOptions{Flags: map[string]string{"static-servers": "myhost 10.1.1.7"},
		Resolve: func(string) ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("10.1.1.7")}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if len(c2.Static.ServerEntries) != 2 || len(c2.Static.Servers) != 1 {
		t.Errorf("entries %v, servers %v", c2.Static.ServerEntries, c2.Static.Servers)
	}
}

func TestRelayOnlyNeedsDestinations(t *testing.T) {
	if _, err := Load(LoadOptions{Flags: map[string]string{"relay-only": "true"}}); err == nil {
		t.Error("relay.only without relay.to accepted")
	}
	if _, err := Load(LoadOptions{Flags: map[string]string{"discovery-interval": "500ms"}}); err == nil {
		t.Error("discovery.interval 500ms accepted")
	}
}

// relay.to refuses multicast and broadcast destinations, naming the
// setting that allows them, unless relay.to_broadcast is set: relays
// relaying to a group relay to each other (issue 39, row 7).
func TestRelayToRefusesBroadcast(t *testing.T) {
	for _, to := range []string{"224.0.1.7", "239.255.0.1:5076", "255.255.255.255", "[ff02::1]:5076"} {
		_, err := Load(LoadOptions{Flags: map[string]string{"relay-to": "10.0.0.9 " + to}})
		if err == nil || !strings.Contains(err.Error(), "relay.to_broadcast") {
			t.Errorf("relay.to %s: %v, want refused naming relay.to_broadcast", to, err)
		}
		if _, err := Load(LoadOptions{Flags: map[string]string{"relay-to": to, "relay-to-broadcast": "true"}}); err != nil {
			t.Errorf("relay.to %s with relay.to_broadcast: %v", to, err)
		}
	}
	if _, err := Load(LoadOptions{Flags: map[string]string{"relay-to": "10.0.0.9 10.0.0.255"}}); err != nil {
		t.Errorf("unicast relay.to refused: %v", err)
	}
}
