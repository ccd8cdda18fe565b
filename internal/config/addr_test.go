package config

import (
	"net/netip"
	"strings"
	"testing"
)

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
		{"127.0.0.1 127.0.0.1:5076 127.0.0.1", "127.0.0.1:5076"},
		{"127.0.0.1:00099", "127.0.0.1:99"},
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
	bad := []struct{ in, why string }{
		{"127.0.0.1:0", "port must be 1-65535"},
		{"127.0.0.1:65536", "port must be 1-65535"},
		{"127.0.0.1:-1", "not a number"},
		{"127.0.0.1:", "empty port"},
		{":5076", "empty host"},
		{"[::1", "missing ]"},
		{"[::1]5", "expected :port"},
		{"[127.0.0.1]", "not an IPv6 address"},
		{"::1:x:y", "IPv6 address with a port"},
		{"fe80::1%eth0", "zones are not supported"},
		{"[fe80::1%eth0]:5", "zones are not supported"},
		{"pva://127.0.0.1", "not supported"},
		{"239.0.0.1@lo", "not supported"},
		{"unknown.example", "cannot resolve host"},
		{"127.0.0.1 bad:port", `"bad:port"`},
	}
	for _, tc := range bad {
		_, err := ParseAddrListWith(tc.in, 5076, testResolver)
		if err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("ParseAddrList(%q) error %v, want one containing %q", tc.in, err, tc.why)
		}
	}
	// The exported form resolves localhost without DNS.
	if got, err := ParseAddrList("localhost 127.0.0.2:9", 5075); err != nil || joinStrings(got) != "127.0.0.1:5075 127.0.0.2:9" {
		t.Errorf("ParseAddrList = %v, %v", got, err)
	}
}

func TestParseIgnoreAddrList(t *testing.T) {
	l, err := ParseIgnoreAddrList("127.0.0.1 127.0.0.2:0 127.0.0.3:5076 [::1]")
	if err != nil {
		t.Fatal(err)
	}
	if s := joinStrings(l); s != "127.0.0.1:0 127.0.0.2:0 127.0.0.3:5076 [::1]:0" {
		t.Errorf("ignore list = %q", s)
	}
	cases := map[string]bool{
		"127.0.0.1:1": true, "127.0.0.1:5076": true, "127.0.0.2:9": true,
		"127.0.0.3:5076": true, "127.0.0.3:5077": false, "127.0.0.4:5076": false,
		"[::ffff:127.0.0.1]:5": true, "[::1]:3": true,
	}
	for src, want := range cases {
		if got := IgnoreMatches(l, netip.MustParseAddrPort(src)); got != want {
			t.Errorf("IgnoreMatches(%s) = %v, want %v", src, got, want)
		}
	}
	if _, err := ParseIgnoreAddrList("127.0.0.1:65536"); err == nil {
		t.Errorf("port 65536 accepted")
	}
}

func TestParseInterfaceList(t *testing.T) {
	l, err := ParseInterfaceList("127.0.0.1:5075 127.0.0.1:9 [::1]:3 0.0.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if s := joinStrings(l); s != "127.0.0.1 ::1 0.0.0.0" {
		t.Errorf("interfaces = %q (ports must be ignored, duplicates dropped)", s)
	}
}

func FuzzParseAddrList(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "[::1]:5", "a:b:c", "[", "]:", "1.2.3.4:99999", "localhost:0", "\x00"} {
		f.Add(s)
	}
	noDNS := func(string) ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil }
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseAddrListWith(s, 5076, noDNS)
		if err != nil {
			return
		}
		for _, ap := range l {
			if !ap.IsValid() || ap.Port() == 0 {
				t.Fatalf("%q gave %v", s, ap)
			}
		}
		// Printing and parsing again is stable.
		again, err := ParseAddrListWith(joinStrings(l), 5076, nil)
		if err != nil || joinStrings(again) != joinStrings(l) {
			t.Fatalf("%q: round trip %v -> %v, %v", s, l, again, err)
		}
	})
}

func BenchmarkNameAllowed(b *testing.B) {
	a := Access{
		NameAllow: []NamePattern{MustNamePattern("LINAC:*"), MustNamePattern("RING:*")},
		NameDeny:  []NamePattern{MustNamePattern("re:.*:SECRET[0-9]+"), MustNamePattern("LINAC:TEST")},
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
