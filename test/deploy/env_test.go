package deploy

import (
	"regexp"
	"strings"
	"testing"

	"github.com/pvans-project/pvans/internal/config"
)

var envAssign = regexp.MustCompile(`^(#?)\s*(EPICS_[A-Z0-9_]+)=(.*)$`)

// TestEnvironmentFileSample checks every variable the sample
// /etc/default/pvans shows is one pvans reads, with a value it accepts,
// that the sample sets nothing while commented out, and that it mentions
// every EPICS_* variable of docs/configuration.md.
func TestEnvironmentFileSample(t *testing.T) {
	text := readRepoFile(t, "deploy/systemd/pvans.env")
	n := 0
	for i, line := range strings.Split(text, "\n") {
		m := envAssign.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				t.Errorf("pvans.env:%d: %q is neither a comment nor VAR=value", i+1, l)
			}
			continue
		}
		n++
		if m[1] != "#" {
			t.Errorf("pvans.env:%d: %s is set; the sample should only show values, commented", i+1, m[2])
		}
		name, val := m[2], strings.Trim(m[3], `"'`)
		c, err := config.Load(config.LoadOptions{
			Env: func(k string) (string, bool) {
				if k == name {
					return val, true
				}
				return "", false
			},
			Resolve: noResolve,
		})
		if err != nil {
			t.Errorf("pvans.env:%d: %s=%s: %v", i+1, name, val, err)
			continue
		}
		took := false
		for _, s := range c.Provenance() {
			took = took || s.Source == "env "+name
		}
		if !took {
			t.Errorf("pvans.env:%d: pvans ignores %s", i+1, name)
		}
	}
	if n == 0 {
		t.Fatal("pvans.env shows no variables")
	}
	for _, v := range regexp.MustCompile(`EPICS_[A-Z0-9_]+`).FindAllString(readRepoFile(t, "docs/configuration.md"), -1) {
		if !strings.Contains(text, v) {
			t.Errorf("pvans.env does not mention %s (docs/configuration.md)", v)
		}
	}
}
