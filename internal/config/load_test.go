package config

import (
	"errors"
	"flag"
	"math"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDefaultsAreValid(t *testing.T) {
	d := Defaults()
	if err := d.Validate(); err != nil {
		t.Fatalf("Defaults().Validate() = %v", err)
	}
	if d.PVA.ServerPort != 5075 || d.PVA.BroadcastPort != 5076 {
		t.Errorf("ports = %d/%d, want 5075/5076", d.PVA.ServerPort, d.PVA.BroadcastPort)
	}
	if len(d.PVA.Interfaces) != 1 || d.PVA.Interfaces[0] != netip.IPv4Unspecified() {
		t.Errorf("interfaces = %v, want [0.0.0.0]", d.PVA.Interfaces)
	}
	if !d.PVA.AutoAddrList || !d.PVA.AutoBeaconAddrList {
		t.Errorf("auto lists default off")
	}
	if d.PVA.TCPTimeout() != 40*time.Second {
		t.Errorf("idle timeout = %v, want 40s", d.PVA.TCPTimeout())
	}
	if d.HTTP.Listen != "127.0.0.1:9076" || d.Registry.MaxServers != 20000 || d.TCP.MaxConnections != 10000 ||
		d.Beacon.Expiry != 360*time.Second ||
		!d.UDP.AnswerSearches || d.UDP.SendBeacons {
		t.Errorf("daemon defaults changed: %+v", d)
	}
	// Load with no sources is exactly the defaults.
	c := mustLoad(t, LoadOptions{})
	for _, s := range c.Provenance() {
		if s.Source != "default" && !strings.HasPrefix(s.Source, "derived") {
			t.Errorf("%s: source %q with no sources", s.Key, s.Source)
		}
		if want := specByKey[s.Key].get(&d); s.Value != want {
			t.Errorf("%s = %q, want default %q", s.Key, s.Value, want)
		}
	}
}

// TestPrecedence sets each setting from every source in turn and checks
// the highest one wins and is recorded.
func TestPrecedence(t *testing.T) {
	type src struct{ file, env, flag string }
	cases := []struct {
		key, section, name, envName, flagName string
		vals                                  src
		get                                   func(*Config) string
		want                                  [4]string // default, file, env, flag
	}{
		{key: "pva.server_port", section: "pva", name: "server_port", envName: "EPICS_PVAS_SERVER_PORT", flagName: "server-port",
			vals: src{"6000", "7000", "8000"},
			get:  func(c *Config) string { return specByKey["pva.server_port"].get(c) },
			want: [4]string{"5075", "6000", "7000", "8000"},
		},
		{key: "pva.addr_list", section: "pva", name: "addr_list", envName: "EPICS_PVA_ADDR_LIST", flagName: "addr-list",
			vals: src{"127.0.0.2", "127.0.0.3:99", "127.0.0.4 127.0.0.5"},
			get:  func(c *Config) string { return joinStrings(c.PVA.AddrList) },
			want: [4]string{"", "127.0.0.2:5076", "127.0.0.3:99", "127.0.0.4:5076 127.0.0.5:5076"},
		},
		{key: "pva.auto_addr_list", section: "pva", name: "auto_addr_list", envName: "EPICS_PVA_AUTO_ADDR_LIST", flagName: "auto-addr-list",
			vals: src{"NO", "yes", "false"},
			get:  func(c *Config) string { return specByKey["pva.auto_addr_list"].get(c) },
			want: [4]string{"YES", "NO", "YES", "NO"},
		},
		{key: "pva.conn_tmo", section: "pva", name: "conn_tmo", envName: "EPICS_PVA_CONN_TMO", flagName: "conn-tmo",
			vals: src{"3", "6", "9"},
			get:  func(c *Config) string { return c.PVA.TCPTimeout().String() },
			want: [4]string{"40s", "4s", "8s", "12s"},
		},
		{key: "http.listen", section: "http", name: "listen", flagName: "http-listen",
			vals: src{"127.0.0.1:1000", "", "127.0.0.1:2000"},
			get:  func(c *Config) string { return c.HTTP.Listen },
			want: [4]string{"127.0.0.1:9076", "127.0.0.1:1000", "127.0.0.1:1000", "127.0.0.1:2000"},
		},
		{key: "tcp.max_connections", section: "tcp", name: "max_connections", flagName: "tcp-max-connections",
			vals: src{"4", "", "8"},
			get:  func(c *Config) string { return specByKey["tcp.max_connections"].get(c) },
			want: [4]string{"10000", "4", "4", "8"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			path := writeFile(t, tc.section+":\n  "+tc.name+": \""+tc.vals.file+"\"\n")
			var env func(string) (string, bool)
			if tc.envName != "" {
				env = envOf(tc.envName, tc.vals.env)
			}
			steps := []struct {
				o      LoadOptions
				source string
			}{
				{LoadOptions{}, "default"},
				{LoadOptions{File: path}, "file " + path},
				{LoadOptions{File: path, Env: env}, "env " + tc.envName},
				{LoadOptions{File: path, Env: env, Flags: map[string]string{tc.flagName: tc.vals.flag}}, "flag --" + tc.flagName},
			}
			for i, st := range steps {
				c := mustLoad(t, st.o)
				if got := tc.get(c); got != tc.want[i] {
					t.Errorf("step %d (%s): value %q, want %q", i, st.source, got, tc.want[i])
				}
				wantSrc := st.source
				if tc.envName == "" && i == 2 {
					wantSrc = "file " + path // no env variable: the file still wins
				}
				if tc.key == "pva.conn_tmo" && i == 0 {
					wantSrc = "default"
				}
				if got := prov(c, tc.key).Source; got != wantSrc {
					t.Errorf("step %d: source %q, want %q", i, got, wantSrc)
				}
			}
		})
	}
}

func TestEnvFallbacksFollowPVXS(t *testing.T) {
	cases := []struct {
		env       []string
		key, want string
		source    string
	}{
		{[]string{"EPICS_PVA_SERVER_PORT", "6001"}, "pva.server_port", "6001", "env EPICS_PVA_SERVER_PORT"},
		{[]string{"EPICS_PVA_SERVER_PORT", "6001", "EPICS_PVAS_SERVER_PORT", "6002"}, "pva.server_port", "6002", "env EPICS_PVAS_SERVER_PORT"},
		{[]string{"EPICS_PVA_BROADCAST_PORT", "6003"}, "pva.broadcast_port", "6003", "env EPICS_PVA_BROADCAST_PORT"},
		{[]string{"EPICS_PVA_BROADCAST_PORT", "6003", "EPICS_PVAS_BROADCAST_PORT", "6004"}, "pva.broadcast_port", "6004", "env EPICS_PVAS_BROADCAST_PORT"},
		// An empty variable counts as unset, as in EPICS Base.
		{[]string{"EPICS_PVAS_SERVER_PORT", "", "EPICS_PVA_SERVER_PORT", "6005"}, "pva.server_port", "6005", "env EPICS_PVA_SERVER_PORT"},
		{[]string{"EPICS_PVA_ADDR_LIST", "127.0.0.9"}, "pva.beacon_addr_list", "127.0.0.9:5076", "env EPICS_PVA_ADDR_LIST"},
		{[]string{"EPICS_PVA_ADDR_LIST", "127.0.0.9", "EPICS_PVAS_BEACON_ADDR_LIST", "127.0.0.8"}, "pva.beacon_addr_list", "127.0.0.8:5076", "env EPICS_PVAS_BEACON_ADDR_LIST"},
		{[]string{"EPICS_PVA_AUTO_ADDR_LIST", "NO"}, "pva.auto_beacon_addr_list", "NO", "env EPICS_PVA_AUTO_ADDR_LIST"},
		{[]string{"EPICS_PVA_AUTO_ADDR_LIST", "NO", "EPICS_PVAS_AUTO_BEACON_ADDR_LIST", "YES"}, "pva.auto_beacon_addr_list", "YES", "env EPICS_PVAS_AUTO_BEACON_ADDR_LIST"},
		// Lists take the effective port as their default, whichever source set it.
		{[]string{"EPICS_PVA_BROADCAST_PORT", "7000", "EPICS_PVA_ADDR_LIST", "127.0.0.1 [::1]"}, "pva.addr_list", "127.0.0.1:7000 [::1]:7000", "env EPICS_PVA_ADDR_LIST"},
		{[]string{"EPICS_PVA_SERVER_PORT", "7001", "EPICS_PVA_NAME_SERVERS", "127.0.0.1 127.0.0.2:80"}, "pva.name_servers", "127.0.0.1:7001 127.0.0.2:80", "env EPICS_PVA_NAME_SERVERS"},
	}
	for _, tc := range cases {
		c := mustLoad(t, LoadOptions{Env: envOf(tc.env...)})
		s := prov(c, tc.key)
		if s.Value != tc.want || s.Source != tc.source {
			t.Errorf("env %v: %s = %q from %q, want %q from %q", tc.env, tc.key, s.Value, s.Source, tc.want, tc.source)
		}
	}
}

// TestEPICSVariables parses good and bad values of every EPICS variable.
func TestEPICSVariables(t *testing.T) {
	good := []struct {
		name, value string
		check       func(*Config) bool
	}{
		{"EPICS_PVAS_INTF_ADDR_LIST", "127.0.0.1:9999 ::1", func(c *Config) bool {
			return reflect.DeepEqual(c.PVA.Interfaces, []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")})
		}},
		{"EPICS_PVAS_INTF_ADDR_LIST", "localhost", func(c *Config) bool { return c.PVA.Interfaces[0] == netip.MustParseAddr("127.0.0.1") }},
		// Multicast entries are groups to receive searches on (PVXS); a
		// list of groups alone serves on 0.0.0.0.
		{"EPICS_PVAS_INTF_ADDR_LIST", "239.1.2.3@eth1 [ff02::42:1]@br0 239.1.2.3,5@eth1", func(c *Config) bool {
			return joinStrings(c.PVA.Interfaces) == "0.0.0.0" && joinStrings(c.PVA.SearchGroups) == "239.1.2.3:0@eth1 [ff02::42:1]:0@br0"
		}},
		{"EPICS_PVAS_SERVER_PORT", "1", func(c *Config) bool { return c.PVA.ServerPort == 1 }},
		{"EPICS_PVA_SERVER_PORT", " 65535 ", func(c *Config) bool { return c.PVA.ServerPort == 65535 }},
		{"EPICS_PVAS_BROADCAST_PORT", "15076", func(c *Config) bool { return c.PVA.BroadcastPort == 15076 }},
		{"EPICS_PVA_BROADCAST_PORT", "15077", func(c *Config) bool { return c.PVA.BroadcastPort == 15077 }},
		{"EPICS_PVA_ADDR_LIST", "127.0.0.1\t127.0.0.2:1234\n[::1]:99 127.0.0.1", func(c *Config) bool {
			return joinStrings(c.PVA.AddrList) == "127.0.0.1:5076 127.0.0.2:1234 [::1]:99"
		}},
		{"EPICS_PVA_AUTO_ADDR_LIST", "no", func(c *Config) bool { return !c.PVA.AutoAddrList }},
		{"EPICS_PVA_AUTO_ADDR_LIST", "0", func(c *Config) bool { return !c.PVA.AutoAddrList }},
		{"EPICS_PVA_AUTO_ADDR_LIST", "False", func(c *Config) bool { return !c.PVA.AutoAddrList }},
		{"EPICS_PVAS_IGNORE_ADDR_LIST", "127.0.0.1 127.0.0.2:0 127.0.0.3:5076", func(c *Config) bool {
			return joinStrings(c.PVA.IgnoreAddrList) == "127.0.0.1:0 127.0.0.2:0 127.0.0.3:5076"
		}},
		{"EPICS_PVAS_BEACON_ADDR_LIST", "127.255.255.255", func(c *Config) bool {
			return joinStrings(c.PVA.BeaconAddrList) == "127.255.255.255:5076"
		}},
		{"EPICS_PVAS_AUTO_BEACON_ADDR_LIST", "NO", func(c *Config) bool { return !c.PVA.AutoBeaconAddrList && c.PVA.AutoAddrList }},
		{"EPICS_PVA_NAME_SERVERS", "localhost ioc1.example:5000 v6only.example", func(c *Config) bool {
			return joinStrings(c.PVA.NameServers) == "127.0.0.1:5075 127.0.0.5:5000 [::1]:5075"
		}},
		{"EPICS_PVA_CONN_TMO", "15", func(c *Config) bool { return c.PVA.ConnTmo == 15 && c.PVA.TCPTimeout() == 20*time.Second }},
		{"EPICS_PVA_CONN_TMO", "-1", func(c *Config) bool { return c.PVA.TCPTimeout() == 40*time.Second }},
		{"EPICS_PVA_CONN_TMO", "inf", func(c *Config) bool { return c.PVA.TCPTimeout() == 40*time.Second }},
		{"EPICS_PVA_CONN_TMO", "0.1", func(c *Config) bool { return c.PVA.TCPTimeout() == 2*time.Second }},
	}
	for _, tc := range good {
		c := mustLoad(t, LoadOptions{Env: envOf(tc.name, tc.value)})
		if !tc.check(c) {
			t.Errorf("%s=%q: unexpected result %+v", tc.name, tc.value, c.PVA)
		}
	}

	bad := []struct{ name, value, why string }{
		{"EPICS_PVAS_INTF_ADDR_LIST", "127.0.0.1 not-a-host", `"not-a-host": cannot resolve host`},
		{"EPICS_PVAS_SERVER_PORT", "70000", "port must be 1-65535"},
		{"EPICS_PVAS_SERVER_PORT", "0", "port must be 1-65535"},
		{"EPICS_PVA_SERVER_PORT", "http", `port "http" is not a number`},
		{"EPICS_PVAS_BROADCAST_PORT", "-5", "not a number"},
		{"EPICS_PVA_BROADCAST_PORT", "99999999999999999999999", "port must be 1-65535"},
		{"EPICS_PVA_ADDR_LIST", "127.0.0.1:65536", `"127.0.0.1:65536": port 65536 is above 65535`},
		{"EPICS_PVA_ADDR_LIST", "[::1", "mismatched brackets"},
		{"EPICS_PVA_ADDR_LIST", "::1 [127.0.0.1]:5", "not an IPv6 address"},
		{"EPICS_PVA_ADDR_LIST", "239.1.1.1@eth0,4", "comma expected before @"},
		{"EPICS_PVA_ADDR_LIST", "239.1.1.1,256", "TTL \"256\" must be a number 0-255"},
		{"EPICS_PVA_NAME_SERVERS", "239.1.1.1", "TCP cannot reach a group"},
		{"EPICS_PVA_AUTO_ADDR_LIST", "maybe", "must be YES or NO"},
		{"EPICS_PVAS_IGNORE_ADDR_LIST", "127.0.0.1:65536", "above 65535"},
		{"EPICS_PVAS_BEACON_ADDR_LIST", "127.0.0.1:", "empty port"},
		{"EPICS_PVAS_AUTO_BEACON_ADDR_LIST", "Y", "must be YES or NO"},
		{"EPICS_PVA_NAME_SERVERS", "nowhere.invalid:5075", "cannot resolve host"},
		{"EPICS_PVA_CONN_TMO", "30s", "not a number of seconds"},
	}
	for _, tc := range bad {
		e := loadErr(t, LoadOptions{Env: envOf(tc.name, tc.value)})
		if len(e.Problems) != 1 {
			t.Errorf("%s=%q: %d problems, want 1: %v", tc.name, tc.value, len(e.Problems), e)
			continue
		}
		p := e.Problems[0]
		if p.Setting != tc.name || p.Value != tc.value || !strings.Contains(p.Error(), tc.why) {
			t.Errorf("%s=%q: got %q (setting %q value %q), want reason containing %q", tc.name, tc.value, p.Error(), p.Setting, p.Value, tc.why)
		}
	}
}

func TestRefusalNamesSettingValueAndWhy(t *testing.T) {
	e := loadErr(t, LoadOptions{Env: envOf("EPICS_PVAS_SERVER_PORT", "70000")})
	if got, want := e.Problems[0].Error(), `EPICS_PVAS_SERVER_PORT="70000": port must be 1-65535`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !strings.Contains(e.Error(), `EPICS_PVAS_SERVER_PORT="70000": port must be 1-65535`) {
		t.Errorf("Error() = %q", e.Error())
	}

	path := writeFile(t, "tcp:\n  max_connections: 0\n")
	e = loadErr(t, LoadOptions{File: path})
	if got, want := e.Problems[0].Error(), path+`:2: tcp.max_connections="0": must be between 1 and 10000000`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}

	e = loadErr(t, LoadOptions{Flags: map[string]string{"dns-refresh": "10ms"}})
	if got, want := e.Problems[0].Error(), `--dns-refresh="10ms": must be 0 (off) or at least 1s`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestAllProblemsReportedTogether(t *testing.T) {
	path := writeFile(t, `
pva:
  server_port: 5075
  ignore_addr_list: 127.0.0.1:x
tcp:
  max_conections: 10
  waiters_total: soon
bogus:
  a: 1
`)
	e := loadErr(t, LoadOptions{
		File:  path,
		Env:   envOf("EPICS_PVA_BROADCAST_PORT", "0", "EPICS_PVA_AUTO_ADDR_LIST", "perhaps"),
		Flags: map[string]string{"log-level": "loud", "no-such-flag": "1", "server-port": "65536"},
	})
	want := []string{
		path + `:8: bogus="": unknown section`,
		path + `:6: tcp.max_conections="10": unknown key`,
		`--no-such-flag="1": unknown flag`,
		`--server-port="65536": port must be 1-65535`,
		`EPICS_PVA_BROADCAST_PORT="0": port must be 1-65535`,
		`EPICS_PVA_AUTO_ADDR_LIST="perhaps": must be YES or NO`,
		path + `:7: tcp.waiters_total="soon": not an integer`,
		path + `:4: pva.ignore_addr_list="127.0.0.1:x": "127.0.0.1:x": port "x" is not a number`,
		`--log-level="loud": must be one of debug, info, warn, error`,
	}
	for _, w := range want {
		if !hasProblem(e, w) {
			t.Errorf("missing problem %q in:\n%v", w, e)
		}
	}
	if len(e.Problems) != len(want) {
		t.Errorf("%d problems, want %d:\n%v", len(e.Problems), len(want), e)
	}
	if !strings.HasPrefix(e.Error(), "invalid configuration (9 problems):\n  ") {
		t.Errorf("Error() = %q", e.Error())
	}
	var p *Problem
	if !errors.As(error(e), &p) {
		t.Errorf("errors.As cannot find a *Problem")
	}
}

func TestOverriddenBadValueIsStillRefused(t *testing.T) {
	path := writeFile(t, "pva:\n  server_port: 99999\n")
	e := loadErr(t, LoadOptions{File: path, Flags: map[string]string{"server-port": "5000"}})
	if !hasProblem(e, `pva.server_port="99999": port must be 1-65535`) {
		t.Errorf("bad file value hidden by a flag was accepted: %v", e)
	}
}

func TestUnknownAndMisshapenYAML(t *testing.T) {
	cases := []struct{ body, want string }{
		{"http:\n  listen: :1\n  lisen: :2\n", `:3: http.lisen=":2": unknown key`},
		{"htp:\n  listen: :1\n", `:1: htp="": unknown section`},
		{"- a\n- b\n", "top level must be a mapping"},
		{"http: 5\n", `http="5": section must be a mapping`},
		{"http:\n  listen: [a, b]\n", `http.listen="": expected a single value, not a list`},
		{"pva:\n  addr_list: {a: 1}\n", "expected a value, not a mapping"},
		{"pva:\n  addr_list: [[127.0.0.1]]\n", "list items must be plain values"},
		{"http:\n  listen: :1\n  listen: :2\n", "key appears twice"},
		{"http:\n  listen: :1\nhttp:\n  listen: :2\n", "section appears twice"},
		{"http:\n  listen: \"unterminated\n", "not valid YAML"},
	}
	for _, tc := range cases {
		path := writeFile(t, tc.body)
		e := loadErr(t, LoadOptions{File: path})
		if !hasProblem(e, tc.want) {
			t.Errorf("%q: want problem containing %q, got %v", tc.body, tc.want, e)
		}
	}
	e := loadErr(t, LoadOptions{File: "/nonexistent/pvans.yaml"})
	if !hasProblem(e, `--config="/nonexistent/pvans.yaml": cannot read: no such file or directory`) {
		t.Errorf("missing file: %v", e)
	}
}

func TestYAMLForms(t *testing.T) {
	path := writeFile(t, `
# comments, empty sections, null values, sequences and anchors
log:
pva:
  addr_list: &hosts [127.0.0.1, "127.0.0.2:99 127.0.0.3"]
  beacon_addr_list: *hosts
  ignore_addr_list:
  auto_addr_list: No
  conn_tmo: 12
tcp:
  max_connections: 1_000
access:
  name_deny: ["re:secret:.*", "test:*", "exact:name", "re:with space"]
registry:
  max_names: 1_000
`)
	c := mustLoad(t, LoadOptions{File: path})
	if got := joinStrings(c.PVA.AddrList); got != "127.0.0.1:5076 127.0.0.2:99 127.0.0.3:5076" {
		t.Errorf("addr_list = %q", got)
	}
	if !reflect.DeepEqual(c.PVA.BeaconAddrList, c.PVA.AddrList) {
		t.Errorf("alias not followed: %v", c.PVA.BeaconAddrList)
	}
	if c.PVA.IgnoreAddrList != nil || c.PVA.AutoAddrList || c.PVA.ConnTmo != 12 {
		t.Errorf("pva = %+v", c.PVA)
	}
	if c.TCP.MaxConnections != 1000 {
		t.Errorf("tcp = %+v", c.TCP)
	}
	if c.Registry.MaxNames != 1000 {
		t.Errorf("max_names = %d", c.Registry.MaxNames)
	}
	for name, denied := range map[string]bool{"secret:a": true, "with space": true, "test:x": true, "exact:name": true, "exact:name2": false, "secretX": false} {
		if got := !c.Access.NameAllowed(name); got != denied {
			t.Errorf("%q denied = %v, want %v", name, got, denied)
		}
	}
	if s := prov(c, "tcp.max_connections"); s.Value != "1000" || s.Source != "file "+path {
		t.Errorf("max_connections provenance %+v", s)
	}
}

func TestIdleTimeoutFollowsConnTmo(t *testing.T) {
	c := mustLoad(t, LoadOptions{Env: envOf("EPICS_PVA_CONN_TMO", "60")})
	if c.PVA.TCPTimeout() != 80*time.Second {
		t.Errorf("idle = %v, want 80s", c.PVA.TCPTimeout())
	}
	// tcp.idle_timeout is gone: the flag is ignored with a warning.
	c = mustLoad(t, LoadOptions{Env: envOf("EPICS_PVA_CONN_TMO", "60"), Flags: map[string]string{"tcp-idle-timeout": "1m30s"}})
	if c.PVA.TCPTimeout() != 80*time.Second || len(c.Warnings()) != 1 || !strings.Contains(c.Warnings()[0], "tcp.idle_timeout") {
		t.Errorf("removed flag: idle %v, warnings %q", c.PVA.TCPTimeout(), c.Warnings())
	}
}

func TestTCPTimeout(t *testing.T) {
	cases := []struct {
		tmo  float64
		want time.Duration
	}{
		{30, 40 * time.Second}, {60, 80 * time.Second}, {3, 4 * time.Second},
		{1.5, 2 * time.Second}, {1, 2 * time.Second}, {0, 40 * time.Second},
		{-5, 40 * time.Second}, {math.Inf(1), 40 * time.Second}, {math.NaN(), 40 * time.Second},
		{1e30, 40 * time.Second},
	}
	for _, tc := range cases {
		if got := (PVA{ConnTmo: tc.tmo}).TCPTimeout(); got != tc.want {
			t.Errorf("TCPTimeout(%v) = %v, want %v", tc.tmo, got, tc.want)
		}
	}
}

func TestReloadKeepsLastGood(t *testing.T) {
	path := writeFile(t, "http:\n  listen: 127.0.0.1:1000\n")
	first := mustLoad(t, LoadOptions{File: path, Resolve: testResolver})

	if err := os.WriteFile(path, []byte("http:\n  listen: 127.0.0.1:2000\ntcp:\n  max_connections: many\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Reload(first)
	if err == nil || got != first {
		t.Fatalf("Reload of a bad file = (%p, %v), want (prev %p, error)", got, err, first)
	}
	if first.HTTP.Listen != "127.0.0.1:1000" {
		t.Errorf("prev modified: %q", first.HTTP.Listen)
	}
	if !strings.Contains(err.Error(), `tcp.max_connections="many": not an integer`) {
		t.Errorf("reload error %q", err)
	}

	if err := os.WriteFile(path, []byte("http:\n  listen: 127.0.0.1:3000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	next, err := Reload(got)
	if err != nil || next == first || next.HTTP.Listen != "127.0.0.1:3000" {
		t.Fatalf("Reload of a good file = (%+v, %v)", next.HTTP, err)
	}
	if ch := Changed(first, next); !reflect.DeepEqual(ch, []string{"http.listen"}) {
		t.Errorf("Changed = %v", ch)
	}
	d := Defaults()
	if _, err := Reload(&d); err == nil {
		t.Errorf("Reload of a Config not made by Load succeeded")
	}
}

func TestValidateCodeBuilt(t *testing.T) {
	c := Defaults()
	c.TCP.MaxConnections = 0
	c.Log.Format = "xml"
	c.PVA.ServerPort = 0
	err := c.Validate()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Validate = %v", err)
	}
	want := []string{
		`pva.server_port="0": port must be 1-65535`,
		`log.format="xml": must be one of auto, console, json`,
		`tcp.max_connections="0": must be between 1 and 10000000`,
	}
	if len(e.Problems) != len(want) {
		t.Fatalf("%d problems, want %d: %v", len(e.Problems), len(want), e)
	}
	for i, w := range want {
		if got := e.Problems[i].Error(); got != w {
			t.Errorf("problem %d = %q, want %q", i, got, w)
		}
	}
}

func TestFlags(t *testing.T) {
	path := writeFile(t, "tcp:\n  max_connections: 3\nsearch:\n  through: false\n")
	fs := flag.NewFlagSet("pvans", flag.ContinueOnError)
	fv := RegisterFlags(fs)
	err := fs.Parse([]string{"--config", path, "--search-through", "--server-port=7777", "--discovery-at-start=false",
		"--access-name-deny", "a:* re:b.*", "--udp-answer-searches=NO"})
	if err != nil {
		t.Fatal(err)
	}
	if fv.ConfigFile != path {
		t.Errorf("ConfigFile = %q", fv.ConfigFile)
	}
	o := fv.Options(envOf("EPICS_PVAS_SERVER_PORT", "6666", "EPICS_PVA_BROADCAST_PORT", "6667"))
	o.Resolve = testResolver
	c := mustLoad(t, o)
	if !c.Search.Through || c.Search.DiscoveryAtStart || c.UDP.AnswerSearches {
		t.Errorf("bool flags: %+v %+v", c.Search, c.UDP)
	}
	if c.PVA.ServerPort != 7777 || c.PVA.BroadcastPort != 6667 || c.TCP.MaxConnections != 3 {
		t.Errorf("flag/env/file: server %d broadcast %d max connections %d", c.PVA.ServerPort, c.PVA.BroadcastPort, c.TCP.MaxConnections)
	}
	if c.Access.NameAllowed("a:1") || c.Access.NameAllowed("bcd") || !c.Access.NameAllowed("c") {
		t.Errorf("name deny flag not applied: %v", c.Access.NameDeny)
	}
	if s := prov(c, "search.through"); s.Source != "flag --search-through" || s.Value != "true" {
		t.Errorf("provenance %+v", s)
	}
	if s := prov(c, "pva.broadcast_port"); s.Source != "env EPICS_PVA_BROADCAST_PORT" {
		t.Errorf("provenance %+v", s)
	}
	// Every setting has a flag and the usage names its default.
	for _, s := range specs {
		f := fs.Lookup(s.flag)
		if f == nil {
			t.Errorf("no flag for %s", s.key)
			continue
		}
		if !strings.Contains(f.Usage, "file "+s.key) {
			t.Errorf("--%s usage %q", s.flag, f.Usage)
		}
	}
	if len(fv.Values()) != 5 {
		t.Errorf("Values() = %v: unset flags recorded", fv.Values())
	}
}

func TestNamePatternsAndPrefixes(t *testing.T) {
	a := Access{
		NameAllow: []NamePattern{mustNamePattern("LINAC:*"), mustNamePattern("re:RING:[0-9]+")},
		NameDeny:  []NamePattern{mustNamePattern("LINAC:SECRET?")},
	}
	for name, want := range map[string]bool{
		"LINAC:BPM1": true, "LINAC:SECRET1": false, "LINAC:SECRET12": true,
		"RING:12": true, "RING:12a": false, "XRING:12": false, "linac:x": false,
		"LINAC.x": false,
	} {
		if got := a.NameAllowed(name); got != want {
			t.Errorf("NameAllowed(%q) = %v, want %v", name, got, want)
		}
	}
	star := mustNamePattern("*")
	if !star.Match("anything") || !star.Match("") {
		t.Errorf("* must match every name")
	}
	var zero NamePattern
	if zero.Match("") || zero.Match("x") {
		t.Errorf("zero NamePattern matched")
	}
	if _, err := ParseNamePattern("re:("); err == nil {
		t.Errorf("bad regexp accepted")
	}
	e := loadErr(t, LoadOptions{Flags: map[string]string{"access-name-allow": "re:[z-a]"}})
	if !hasProblem(e, `--access-name-allow="re:[z-a]": "re:[z-a]": bad regular expression`) {
		t.Errorf("%v", e)
	}

	pl, err := ParsePrefixList([]string{"10.0.0.0/8 192.168.1.7", "::ffff:172.16.0.0/108", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := joinStrings(pl); got != "10.0.0.0/8 192.168.1.7/32 172.16.0.0/12 ::1/128" {
		t.Errorf("prefixes = %q", got)
	}
	b := Access{TCPClientAllow: pl[:2], TCPClientDeny: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}}
	for addr, want := range map[string]bool{
		"10.1.2.3": true, "10.9.1.1": false, "192.168.1.7": true, "192.168.1.8": false,
		"::ffff:10.1.2.3": true,
	} {
		if got := b.TCPClientAllowed(netip.MustParseAddr(addr)); got != want {
			t.Errorf("TCPClientAllowed(%s) = %v, want %v", addr, got, want)
		}
	}
	if !b.UDPClientAllowed(netip.MustParseAddr("8.8.8.8")) || !b.ServerAllowed(netip.MustParseAddr("8.8.8.8")) {
		t.Errorf("empty allow lists must allow all")
	}
	for _, bad := range []string{"10.0.0.0/33", "10.0.0", "::ffff:1.2.3.4/90"} {
		if _, err := ParsePrefixList([]string{bad}); err == nil {
			t.Errorf("prefix %q accepted", bad)
		}
	}
}

func TestParseValues(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "4096": 4096, "64KiB": 64 << 10, "1 mib": 1 << 20, "2GiB": 2 << 30, "1_000": 1000} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1.5MiB", "KiB", "10kb", "9999999999GiB"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) accepted", in)
		}
	}
	for n, want := range map[int64]string{0: "0", 1000: "1000", 1024: "1KiB", 3 << 20: "3MiB", 1<<30 + 1: "1073741825"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
	for in, want := range map[string]time.Duration{"90s": 90 * time.Second, "5m": 5 * time.Minute, "360": 360 * time.Second, "0.5": 500 * time.Millisecond} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "soon", "5 minutes", "NaN", "1e300"} {
		if _, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) accepted", in)
		}
	}
	for in, want := range map[string]bool{"YES": true, "yes": true, "Yes": true, "true": true, "1": true, "NO": false, "no": false, "FALSE": false, "0": false} {
		if got, err := ParseBool(in); err != nil || got != want {
			t.Errorf("ParseBool(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "Y", "on", "2"} {
		if _, err := ParseBool(in); err == nil {
			t.Errorf("ParseBool(%q) accepted", in)
		}
	}
}

// Loopback is valid and sends nothing off the host.
func TestLoopbackStaysOnHost(t *testing.T) {
	c := Loopback(15075, 15076)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.PVA.AutoAddrList || c.PVA.AutoBeaconAddrList {
		t.Fatal("automatic (broadcast) address lists on")
	}
	for _, l := range [][]netip.AddrPort{AddrPorts(c.PVA.AddrList), AddrPorts(c.PVA.BeaconAddrList), c.PVA.NameServers} {
		for _, a := range l {
			if !a.Addr().IsLoopback() {
				t.Fatalf("destination %v is not loopback", a)
			}
		}
	}
	for _, a := range c.PVA.Interfaces {
		if !a.IsLoopback() {
			t.Fatalf("interface %v is not loopback", a)
		}
	}
	if c.PVA.ServerPort != 15075 || c.PVA.BroadcastPort != 15076 || c.PVA.AddrList[0].Port() != 15076 || c.Snapshot.Path != "" {
		t.Fatalf("ports or snapshot: %+v %+v", c.PVA, c.Snapshot)
	}
	if c.Access.ServerAllowed(netip.MustParseAddr("10.0.0.1")) || !c.Access.ServerAllowed(netip.MustParseAddr("127.0.0.5")) {
		t.Fatal("server allow list is not loopback only")
	}
}

// udp.learn_interfaces: interface addresses (host names resolved), "all"
// as the wildcard, printed back as "all"; a group is refused.
func TestLearnInterfaces(t *testing.T) {
	c := mustLoad(t, LoadOptions{Flags: map[string]string{"udp-learn-interfaces": "10.78.0.1 localhost"}})
	if got := c.UDP.LearnInterfaces; !slices.Equal(got, []netip.Addr{netip.MustParseAddr("10.78.0.1"), netip.MustParseAddr("127.0.0.1")}) {
		t.Errorf("learn_interfaces = %v", got)
	}
	c = mustLoad(t, LoadOptions{File: writeFile(t, "udp:\n  learn_interfaces: [ALL]\n")})
	if got := c.UDP.LearnInterfaces; !slices.Equal(got, []netip.Addr{netip.IPv4Unspecified()}) {
		t.Errorf("learn_interfaces all = %v", got)
	}
	if s := prov(c, "udp.learn_interfaces"); s.Value != "all" {
		t.Errorf("printed as %q", s.Value)
	}
	e := loadErr(t, LoadOptions{Flags: map[string]string{"udp-learn-interfaces": "239.1.2.3"}})
	if got := e.Problems[0].Error(); !strings.Contains(got, "239.1.2.3 is a multicast group") {
		t.Errorf("group: %q", got)
	}
}
