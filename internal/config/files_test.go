package config

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite the generated table in docs/configuration.md")

const (
	prodFile    = "../../configs/pvans.yaml"
	localFile   = "../../configs/local.yaml"
	replicaFile = "../../configs/replica.yaml"
	docsFile    = "../../docs/configuration.md"
)

// fileKeys lists the section.key entries a YAML file sets.
func fileKeys(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for sec, kv := range m {
		for k := range kv {
			out[sec+"."+k] = true
		}
	}
	return out
}

// The production example sets every key, each to its default, so it is
// also a true table of defaults.
func TestProductionExample(t *testing.T) {
	keys := fileKeys(t, prodFile)
	for _, s := range specs {
		if !keys[s.key] {
			t.Errorf("%s does not set %s", prodFile, s.key)
		}
	}
	c := mustLoad(t, LoadOptions{File: prodFile})
	d := Defaults()
	for _, s := range c.Provenance() {
		if want := specByKey[s.Key].get(&d); s.Value != want {
			t.Errorf("%s: %s = %q, default is %q", prodFile, s.Key, s.Value, want)
		}
	}
	// Every key carries a comment in the example.
	data, _ := os.ReadFile(prodFile)
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		if !strings.HasPrefix(l, "  ") || strings.HasPrefix(trimmed, "#") || trimmed == "" {
			continue
		}
		if i == 0 || !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#") {
			t.Errorf("%s:%d: key without a comment above it: %q", prodFile, i+1, l)
		}
	}
}

// The local example must keep everything on loopback.
func TestLocalExample(t *testing.T) {
	c := mustLoad(t, LoadOptions{File: localFile})
	if c.PVA.AutoAddrList || c.PVA.AutoBeaconAddrList {
		t.Errorf("auto address lists on")
	}
	if len(c.PVA.Interfaces) != 1 || c.PVA.Interfaces[0] != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("interfaces = %v", c.PVA.Interfaces)
	}
	var all []netip.AddrPort
	all = append(all, AddrPorts(c.PVA.AddrList)...)
	all = append(all, AddrPorts(c.PVA.BeaconAddrList)...)
	all = append(all, c.PVA.NameServers...)
	all = append(all, c.Static.Servers...)
	if len(c.PVA.AddrList) == 0 || len(c.PVA.BeaconAddrList) == 0 {
		t.Errorf("addr_list/beacon_addr_list empty")
	}
	for _, ap := range all {
		if !ap.Addr().IsLoopback() {
			t.Errorf("non-loopback destination %s", ap)
		}
	}
	if c.HTTP.Listen != "127.0.0.1:9076" {
		t.Errorf("http.listen = %q", c.HTTP.Listen)
	}
	if !strings.HasPrefix(c.Snapshot.Path, "/tmp/") {
		t.Errorf("snapshot path %q", c.Snapshot.Path)
	}
	if c.Access.UDPClientAllowed(netip.MustParseAddr("192.0.2.1")) || !c.Access.UDPClientAllowed(netip.MustParseAddr("127.0.0.1")) {
		t.Errorf("local access lists not loopback-only")
	}
}

const (
	beginGen = "<!-- BEGIN GENERATED SETTINGS TABLE: go test ./internal/config -run TestDocs -update -->"
	endGen   = "<!-- END GENERATED SETTINGS TABLE -->"
)

func referenceTable() string {
	var b strings.Builder
	cur := ""
	for _, r := range References() {
		if r.Section != cur {
			cur = r.Section
			fmt.Fprintf(&b, "\n### `%s`\n\n", cur)
			b.WriteString("| File key | Flag | Environment | Default | On reload | Meaning |\n")
			b.WriteString("| --- | --- | --- | --- | --- | --- |\n")
		}
		env := "—"
		if len(r.Env) > 0 {
			env = "`" + strings.Join(r.Env, "`, then `") + "`"
		}
		var def string
		switch {
		case r.Derived != "":
			def = "`" + r.Default + "` (" + r.Derived + ")"
		case r.Default == "":
			def = "empty"
		default:
			def = "`" + r.Default + "`"
		}
		reload := "applied"
		if r.NeedsRestart {
			reload = "**restart**"
		}
		fmt.Fprintf(&b, "| `%s` | `--%s` | %s | %s | %s | %s |\n", r.Key, r.Flag, env, def, reload, strings.ReplaceAll(r.Usage, "|", "\\|"))
	}
	return b.String()
}

// TestDocs keeps the reference table in docs/configuration.md equal to the
// settings the code knows.
func TestDocs(t *testing.T) {
	data, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, beginGen), strings.Index(doc, endGen)
	if i < 0 || j < i {
		t.Fatalf("%s: generated-table markers missing", docsFile)
	}
	gen := referenceTable()
	if *update {
		doc = doc[:i+len(beginGen)] + "\n" + gen + "\n" + doc[j:]
		if err := os.WriteFile(docsFile, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := strings.TrimSpace(doc[i+len(beginGen) : j]); got != strings.TrimSpace(gen) {
		t.Errorf("%s is out of date; run go test ./internal/config -run TestDocs -update", docsFile)
	}
}

// The replica example loads, and a replica never names another replica
// as its upstream (docs/operations.md, "High availability").
func TestReplicaExample(t *testing.T) {
	c := mustLoad(t, LoadOptions{File: replicaFile})
	if len(c.PVA.NameServers) != 0 {
		t.Errorf("name_servers = %v, want none", c.PVA.NameServers)
	}
	if c.Snapshot.Path == "" || !c.Search.Through {
		t.Errorf("snapshot %q, search-through %v", c.Snapshot.Path, c.Search.Through)
	}
}

// map.rules: one rule per sequence item, or ';'-separated fields in one
// flag string; a bad rule names itself.
func TestMapRules(t *testing.T) {
	path := writeFile(t, `map:
  rules:
    - "servers=172.17.0.0/16 except_clients=172.17.0.0/16 to=10.0.0.5 ports=5075:15075"
    - servers=10.9.0.5:5075;to=10.0.0.5:25075
`)
	c := mustLoad(t, LoadOptions{File: path})
	if len(c.Map.Rules) != 2 || c.Map.Rules[1].String() != "servers=10.9.0.5:5075;to=10.0.0.5:25075" {
		t.Fatalf("rules = %v", c.Map.Rules)
	}
	if got, ok := c.Map.Rules.Apply(netip.MustParseAddrPort("172.17.0.5:5075"), netip.MustParseAddr("192.168.1.1")); !ok || got.String() != "10.0.0.5:15075" {
		t.Errorf("Apply = %v %v", got, ok)
	}
	e := loadErr(t, LoadOptions{File: writeFile(t, "map:\n  rules: [\"servers=172.17.0.0/16\"]\n")})
	if !strings.Contains(e.Error(), "to= or ports= is required") || !strings.Contains(e.Error(), "map.rules") {
		t.Errorf("bad rule: %v", e)
	}
}

// TestEveryRowHasAReloadClass: every row is restart-only with a reason,
// or live with the parts that apply it and from when, never neither or
// both, so a new setting cannot be silently ignored by a reload.
func TestEveryRowHasAReloadClass(t *testing.T) {
	for _, s := range specs {
		r := s.reload
		switch {
		case r.restart != "" && (len(r.parts) > 0 || r.when != ""):
			t.Errorf("%s is both restart-only and live", s.key)
		case r.restart == "" && (len(r.parts) == 0 || r.when == ""):
			t.Errorf("%s: a live setting needs the parts that apply it and from when", s.key)
		}
		for _, p := range r.parts {
			if p == "" || strings.Count(string(p), " ") > 0 {
				t.Errorf("%s: part %q is not a name", s.key, p)
			}
		}
	}
	c1, c2 := Defaults(), Defaults()
	c2.PVA.ServerPort++
	c2.Log.Level = "debug"
	var applied, restart []string
	for _, k := range Changed(&c1, &c2) {
		if r, _ := NeedsRestart(k); r {
			restart = append(restart, k)
		} else {
			applied = append(applied, k)
		}
	}
	if len(applied) != 1 || applied[0] != "log.level" || len(restart) != 1 || restart[0] != "pva.server_port" {
		t.Errorf("changed = %v applied, %v needing restart; want [log.level], [pva.server_port]", applied, restart)
	}
}
