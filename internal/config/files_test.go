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

var update = flag.Bool("update", false, "rewrite the files written from the settings table: configs/pvans.yaml and the table in docs/configuration.md")

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

// exampleHeader opens configs/pvans.yaml; the pva section follows it.
const exampleHeader = `# pvans production configuration: every key, with its default.
#
# Written from the settings table (internal/config/settings.go):
#   go test ./internal/config -run TestProductionExample -update
#
# Precedence: command-line flags > EPICS_* environment > this file > defaults.
# Unknown keys are refused. Lists may be YAML sequences or one
# whitespace-separated string. Durations are Go durations ("90s", "5m") or a
# plain number of seconds. Byte counts are integers with an optional KiB, MiB
# or GiB suffix. Run ` + "`pvans check-config --config FILE`" + ` to see the effective
# value of every setting and where it came from.
# Reference: docs/configuration.md

# Network settings with EPICS environment variables (PVXS meanings). The
# environment variable named on each line overrides the value here.
`

// exampleYAML is configs/pvans.yaml as the rows give it: every key, set to
// its default, under its row's doc (or usage) and environment variables.
func exampleYAML() string {
	var b strings.Builder
	b.WriteString(exampleHeader)
	cur := ""
	for _, s := range specs {
		sec, name, _ := strings.Cut(s.key, ".")
		if sec != cur {
			if cur != "" {
				b.WriteString("\n")
			}
			cur = sec
			b.WriteString(sec + ":\n")
		}
		doc := s.doc
		if doc == "" {
			doc = strings.ToUpper(s.usage[:1]) + s.usage[1:] + "."
		}
		if len(s.env) > 0 {
			doc += " [" + strings.Join(s.env, ", then ") + "]"
		}
		for _, para := range strings.Split(doc, "\n") {
			if strings.HasPrefix(para, "  ") { // preformatted
				b.WriteString("  #" + para + "\n")
				continue
			}
			writeWrapped(&b, "  # ", para, 78)
		}
		v := s.def
		switch {
		case s.isList:
			v = "[" + strings.Join(strings.Fields(v), ", ") + "]"
		case v == "":
			v = `""`
		}
		fmt.Fprintf(&b, "  %s: %s\n", name, v)
	}
	return b.String()
}

// writeWrapped writes text as lines of at most width bytes, each starting
// with prefix, broken at spaces.
func writeWrapped(b *strings.Builder, prefix, text string, width int) {
	line := prefix
	for _, w := range strings.Fields(text) {
		if line != prefix && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line = prefix
		}
		if line != prefix {
			line += " "
		}
		line += w
	}
	b.WriteString(line + "\n")
}

// TestProductionExample keeps configs/pvans.yaml equal to what the rows
// give (-update writes it), and checks that it loads to exactly the
// defaults, so it is also a true table of them.
func TestProductionExample(t *testing.T) {
	gen := exampleYAML()
	if *update {
		if err := os.WriteFile(prodFile, []byte(gen), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(prodFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != gen {
		t.Errorf("%s is out of date; run go test ./internal/config -run TestProductionExample -update", prodFile)
	}
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
