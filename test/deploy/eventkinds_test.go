package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pvans-project/pvans/internal/insight"
)

// eventKind finds the kinds the daemon gives events: a literal Kind, or a
// literal assigned to the variable a Kind is built from.
var eventKind = regexp.MustCompile(`Kind: "([^"]+)"|\bkind(?:, \w+)*\s*:?=\s*"([^"]+)"`)

// TestAPIDocListsEveryEventKind: docs/api.md's list of event kinds holds
// every kind internal/daemon emits (it had lost "restart claimed",
// "replica", "dns", "reload", the keychain and anomaly kinds).
func TestAPIDocListsEveryEventKind(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(doc), "`kind` is one of")
	if !ok {
		t.Fatal("docs/api.md has no \"`kind` is one of\" list under GET /v1/events")
	}
	list, _, _ = strings.Cut(list, "\n\n")
	files, _ := filepath.Glob("../../internal/daemon/*.go")
	kinds := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range eventKind.FindAllStringSubmatch(string(src), -1) {
			if k := m[1] + m[2]; !strings.HasSuffix(k, ": ") { // a prefix, as "anomaly: " + kind
				kinds[k] = true
			}
		}
	}
	for _, a := range []string{insight.AnomalyGUIDChurn, insight.AnomalyBeaconsStopped, insight.AnomalyNotAllowed} {
		kinds["anomaly: "+a] = true
	}
	if len(kinds) < 10 {
		t.Fatalf("found only %d event kinds in internal/daemon: %v", len(kinds), kinds)
	}
	for k := range kinds {
		if !strings.Contains(list, "`"+k+"`") {
			t.Errorf("docs/api.md does not list the event kind %q", k)
		}
	}
}
