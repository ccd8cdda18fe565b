package deploy

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type ruleFile struct {
	Groups []struct {
		Name  string      `yaml:"name"`
		Rules []alertRule `yaml:"rules"`
	} `yaml:"groups"`
}

var (
	alertName   = regexp.MustCompile(`^Pvans[A-Z][A-Za-z0-9]*$`)
	promDur     = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
	severities  = []string{"critical", "warning", "info"}
	wantAlerted = []string{ // what the alerts must watch, by metric family
		"up", "pvans_registry_duplicate_names", "pvans_probe_total", "pvans_resolver_waiters",
		"pvans_udp_drops_total", "pvans_registry_names", "pvans_beacons_total",
	}
)

// TestAlertRules parses the rules strictly and checks each is complete and
// uses only documented metrics and labels.
func TestAlertRules(t *testing.T) {
	docs := documentedMetrics(t)
	dec := yaml.NewDecoder(bytes.NewReader([]byte(readRepoFile(t, "deploy/prometheus/alerts.yml"))))
	dec.KnownFields(true)
	var f ruleFile
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("deploy/prometheus/alerts.yml: %v", err)
	}
	if len(f.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	seen := map[string]bool{}
	used := map[string]bool{}
	for _, g := range f.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: needs a name and rules", g.Name)
		}
		for _, r := range g.Rules {
			where := "alert " + r.Alert
			if !alertName.MatchString(r.Alert) {
				t.Errorf("%s: name must be PvansCamelCase", where)
			}
			if seen[r.Alert] {
				t.Errorf("%s: defined twice", where)
			}
			seen[r.Alert] = true
			if !promDur.MatchString(r.For) {
				t.Errorf("%s: for %q is not a Prometheus duration", where, r.For)
			}
			if !slices.Contains(severities, r.Labels["severity"]) {
				t.Errorf("%s: severity %q, want one of %v", where, r.Labels["severity"], severities)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", where, a)
				}
			}
			for _, fam := range requireExpr(t, where, r.Expr, docs) {
				used[fam] = true
			}
		}
	}
	for _, m := range wantAlerted {
		if !used[m] {
			t.Errorf("no alert watches %s", m)
		}
	}
}

// TestAlertRulesPromtool runs promtool's own checks and the rules' unit
// tests (deploy/prometheus/alerts_test.yml). promtool comes with the
// Debian package "prometheus".
func TestAlertRulesPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus); rules checked by TestAlertRules only")
	}
	dir := filepath.Join(root, "deploy", "prometheus")
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
