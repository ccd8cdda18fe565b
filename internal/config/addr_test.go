package config

import (
	"net/netip"
	"strings"
	"testing"
)

// testResolver knows "myhost" for the PVXS documentation's first example.
func docResolver(host string) ([]netip.Addr, error) {
	if host == "myhost" {
		return []netip.Addr{netip.MustParseAddr("2001:db8::7"), netip.MustParseAddr("10.1.1.7")}, nil
	}
	return testResolver(host)
}

// Every form of PVXS's "Address Spec" (documentation/netconfig.rst), and
// what PVXS's SockEndpoint/SockAddr::setAddress make of the corners.
func TestParseEndpointList(t *testing.T) {
	good := []struct {
		in, want string
		ttl      int
		iface    string
	}{
		// The documentation's examples, one by one.
		{"myhost", "10.1.1.7:5076", NoTTL, ""},                                              // host name, default port, IPv4 preferred
		{"10.1.1.1:5076", "10.1.1.1:5076", NoTTL, ""},                                       // explicit IPv4 and port
		{"[2600:1234::42]", "[2600:1234::42]:5076", NoTTL, ""},                              // IPv6, default port
		{"224.0.2.3,255@192.168.1.1", "224.0.2.3:5076,255@192.168.1.1", 255, "192.168.1.1"}, // IPv4 multicast, TTL, interface address
		{"[ff02::42:1],1@br0", "[ff02::42:1]:5076,1@br0", 1, "br0"},                         // IPv6 multicast, TTL, interface name
		// The grammar's other combinations.
		{"myhost:99", "10.1.1.7:99", NoTTL, ""},
		{"[myhost]:98", "10.1.1.7:98", NoTTL, ""}, // [ip6-or-host]
		{"224.0.2.3:7000", "224.0.2.3:7000", NoTTL, ""},
		{"224.0.2.3,4", "224.0.2.3:5076,4", 4, ""},
		{"224.0.2.3@eth1", "224.0.2.3:5076@eth1", NoTTL, "eth1"},
		{"224.0.2.3:7000,0@eth1", "224.0.2.3:7000,0@eth1", 0, "eth1"},
		{"[ff02::1]:7000,2@br0", "[ff02::1]:7000,2@br0", 2, "br0"},
		{"[ff02::1%br0],3", "[ff02::1]:5076,3@br0", 3, "br0"}, // a zone is the interface
		{"[ff02::1%br0]@eth0", "[ff02::1]:5076@eth0", NoTTL, "eth0"},
		{"ff02::1", "[ff02::1]:5076", NoTTL, ""},    // bare IPv6
		{"224.0.2.3,1@", "224.0.2.3:5076,1", 1, ""}, // "@" alone: no interface
		// TTL and interface mean nothing on unicast: checked, then dropped
		// (PVXS prints them only for multicast).
		{"10.1.1.1,5@eth0", "10.1.1.1:5076", NoTTL, ""},
		{"[::1]:7,9", "[::1]:7", NoTTL, ""},
		// Port 0 is the default port; ports and TTLs are C integers.
		{"10.1.1.1:0", "10.1.1.1:5076", NoTTL, ""},
		{"10.1.1.1:0x13d4", "10.1.1.1:5076", NoTTL, ""},
		{"10.1.1.1:010", "10.1.1.1:8", NoTTL, ""},
		{"224.0.2.3,0x10", "224.0.2.3:5076,16", 16, ""},
		{"[::ffff:10.1.1.1]:7", "10.1.1.1:7", NoTTL, ""},
	}
	for _, tc := range good {
		got, err := parseEndpointList(tc.in, 5076, docResolver)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if len(got) != 1 || got[0].String() != tc.want || got[0].TTL != tc.ttl || got[0].Iface != tc.iface {
			t.Errorf("%q = %+v (%v), want %s ttl %d iface %q", tc.in, got, got, tc.want, tc.ttl, tc.iface)
			continue
		}
		// What pvans prints, it reads back the same.
		// (the address a name had, without the name).
		printed := got[0]
		printed.Host = ""
		again, err := parseEndpointList(got[0].String(), 5076, nil)
		if err != nil || len(again) != 1 || again[0] != printed {
			t.Errorf("%q: round trip %v -> %v, %v", tc.in, got[0], again, err)
		}
	}

	bad := []struct{ in, why string }{
		{"224.0.2.3@eth0,5", "comma expected before @"},
		{"224.0.2.3,", `TTL "" must be a number 0-255`},
		{"224.0.2.3,x", `TTL "x" must be a number 0-255`},
		{"224.0.2.3,-1", `TTL "-1" must be a number 0-255`},
		{"224.0.2.3,256", `TTL "256" must be a number 0-255`},
		{"224.0.2.3,1@a/b", "not an interface name or address"},
		{"224.0.2.3,1@averyveryverylongname", "not an interface name or address"},
		{",1@eth0", "empty address"},
		{"@eth0", "empty address"},
		{"[ff02::1", "mismatched brackets"},
		{"ff02::1]", "mismatched brackets"},
		{"x[ff02::1]", "mismatched brackets"},
		{"[]:5", "empty address inside"},
		{"[ff02::1]5", "expected :port after the closing bracket"},
		{"[ff02::1]:", "empty port"},
		{"[10.1.1.1]", "not an IPv6 address inside the brackets"},
		{"10.1.1.1:", "empty port"},
		{"10.1.1.1:x", `port "x" is not a number`},
		{"10.1.1.1:+5", `port "+5" is not a number`},
		{"10.1.1.1:-1", `port "-1" is not a number`},
		{"10.1.1.1:09", `port "09" is not a number`}, // octal, as strtoull reads it
		{"10.1.1.1:0x", `port "0x" is not a number`},
		{"10.1.1.1:65536", "port 65536 is above 65535"}, // PVXS truncates to 0, i.e. the default
		{"10.1.1.1:99999999999999999999999", "above 65535"},
		{"a:b:c", "not an IPv6 address"},
		{"fe80::1%eth0", "IPv6 zone is used only as the interface of a multicast destination"},
		{"[fe80::1%eth0]:5", "IPv6 zone is used only"},
		{":5076", "empty host"},
		{"pva://10.1.1.1", "URIs are not addresses"},
		{"nowhere.example", "cannot resolve host"},
		{"[nowhere.example]", "cannot resolve host"},
		{"10.1.1.1 bad:port", `"bad:port"`}, // the bad entry is named
	}
	for _, tc := range bad {
		_, err := parseEndpointList(tc.in, 5076, docResolver)
		if err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.why)
		}
	}
}

// Duplicates merge as PVXS's removeDups does: same address, port and
// interface make one entry with the longest TTL, in the first one's place.
func TestEndpointListDuplicates(t *testing.T) {
	l, err := parseEndpointList("224.0.2.3,2@eth0 10.1.1.1 224.0.2.3,9@eth0 224.0.2.3@eth1 10.1.1.1:5076 224.0.2.3@eth0", 5076, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := joinStrings(l); s != "224.0.2.3:5076,9@eth0 10.1.1.1:5076 224.0.2.3:5076@eth1" {
		t.Errorf("merged = %q", s)
	}
}

func TestParseAddrList(t *testing.T) {
	good := []struct {
		in, want string
	}{
		{"", ""},
		{"  \t\n ", ""},
		{"127.0.0.1", "127.0.0.1:5076"},
		{"127.0.0.1:1", "127.0.0.1:1"},
		{"127.0.0.1:65535 127.0.0.2", "127.0.0.1:65535 127.0.0.2:5076"},
		{"::1", "[::1]:5076"},
		{"[::1]", "[::1]:5076"},
		{"[::1]:99", "[::1]:99"},
		{"fe80::1:5000", "[fe80::1:5000]:5076"}, // a bare IPv6 address is all address
		{"[::ffff:127.0.0.1]:7", "127.0.0.1:7"},
		{"localhost:8", "127.0.0.1:8"},
		{"ioc1.example", "127.0.0.5:5076"}, // IPv4 preferred, as PVXS
		{"v6only.example", "[::1]:5076"},
		{"127.0.0.1 127.0.0.1:5076 127.0.0.1", "127.0.0.1:5076"},
		{"127.0.0.1:0", "127.0.0.1:5076"},
		{"239.0.0.1,1@lo", "239.0.0.1:5076"}, // TTL and interface dropped here
	}
	for _, tc := range good {
		got, err := ParseAddrListWith(tc.in, 5076, testResolver)
		if err != nil {
			t.Errorf("ParseAddrList(%q): %v", tc.in, err)
			continue
		}
		if s := joinStrings(got); s != tc.want {
			t.Errorf("ParseAddrList(%q) = %q, want %q", tc.in, s, tc.want)
		}
	}
	// The exported form resolves localhost without DNS.
	if got, err := ParseAddrList("localhost 127.0.0.2:9", 5075); err != nil || joinStrings(got) != "127.0.0.1:5075 127.0.0.2:9" {
		t.Errorf("ParseAddrList = %v, %v", got, err)
	}
	if _, err := ParseAddrListWith("127.0.0.1 ::1%lo", 5076, testResolver); err == nil {
		t.Errorf("a zoned unicast address was accepted")
	}
}

// TestParseIgnoreAddrList: the ignore list is an address list whose
// missing port is 0 (any port; udpsearch's handler tests the matching).
func TestParseIgnoreAddrList(t *testing.T) {
	l, err := ParseAddrListWith("127.0.0.1 127.0.0.2:0 127.0.0.3:5076 [::1]", 0, testResolver)
	if err != nil {
		t.Fatal(err)
	}
	if s := joinStrings(l); s != "127.0.0.1:0 127.0.0.2:0 127.0.0.3:5076 [::1]:0" {
		t.Errorf("ignore list = %q", s)
	}
	if _, err := ParseAddrListWith("127.0.0.1:65536", 0, testResolver); err == nil {
		t.Errorf("port 65536 accepted")
	}
}

func TestParseInterfaceList(t *testing.T) {
	l, groups, err := parseInterfaces(strings.Fields("127.0.0.1:5075 127.0.0.1:9 [::1]:3 0.0.0.0"), testResolver)
	if err != nil {
		t.Fatal(err)
	}
	if s := joinStrings(l); s != "127.0.0.1 ::1 0.0.0.0" || len(groups) != 0 {
		t.Errorf("interfaces = %q, groups %v (ports must be ignored, duplicates dropped)", s, groups)
	}
}

func FuzzParseAddrList(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "[::1]:5", "a:b:c", "[", "]:", "1.2.3.4:99999", "localhost:0", "\x00",
		"224.0.2.3,255@192.168.1.1", "[ff02::42:1],1@br0", "[ff02::1%br0],3", "1.2.3.4:0x10,7@x"} {
		f.Add(s)
	}
	noDNS := func(string) ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil }
	f.Fuzz(func(t *testing.T, s string) {
		l, err := parseEndpointList(s, 5076, noDNS)
		if err != nil {
			return
		}
		for _, ep := range l {
			if !ep.IsValid() || ep.Port() == 0 || ep.Addr().Zone() != "" || ep.TTL < NoTTL || ep.TTL > 255 {
				t.Fatalf("%q gave %+v", s, ep)
			}
		}
		// Printing (entries from different host names merged, as the
		// settings print them) and parsing again is stable.
		again, err := parseEndpointList(joinStrings(merged(l)), 5076, nil)
		if err != nil || joinStrings(again) != joinStrings(merged(l)) {
			t.Fatalf("%q: round trip %v -> %v, %v", s, l, again, err)
		}
	})
}

func BenchmarkNameAllowed(b *testing.B) {
	a := Access{
		NameAllow: []NamePattern{mustNamePattern("LINAC:*"), mustNamePattern("RING:*")},
		NameDeny:  []NamePattern{mustNamePattern("re:.*:SECRET[0-9]+"), mustNamePattern("LINAC:TEST")},
	}
	b.ReportAllocs()
	for b.Loop() {
		if !a.NameAllowed("RING:BPM:0042:X") {
			b.Fatal("denied")
		}
	}
}

func BenchmarkClientAllowed(b *testing.B) {
	pl, _ := ParsePrefixList([]string{"10.0.0.0/8 172.16.0.0/12 192.168.0.0/16 127.0.0.0/8"})
	a := Access{UDPClientAllow: pl, UDPClientDeny: pl[:1]}
	src := netip.MustParseAddr("192.168.17.4")
	b.ReportAllocs()
	for b.Loop() {
		if !a.UDPClientAllowed(src) {
			b.Fatal("denied")
		}
	}
}
