//go:build linux

package routed

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

// The example configurations of docs/operations.md ("Reaching IOCs on
// other networks") are accepted by `pvans check-config`. Their host names
// resolve, in a namespace of the test's, from a hosts file `ip netns
// exec` mounts over /etc/hosts for that namespace only.
func TestExampleConfigs(t *testing.T) {
	testutil.RequireNetns(t, "the example-configuration check (host names from a namespace's hosts file)")
	ns := testutil.NewNetns(t, fmt.Sprintf("pvans-rt-cfg-%d-%d", os.Getpid(), seq.Add(1)))
	etc := filepath.Join("/etc/netns", ns.Name)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(etc) })
	hosts := "10.71.2.10 pvans-a.example.org\n10.71.2.11 pvans-b.example.org\n" +
		"10.244.1.5 motors.epics.svc.cluster.local\n10.244.1.6 vacuum.epics.svc.cluster.local\n"
	if err := os.WriteFile(filepath.Join(etc, "hosts"), []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../../configs/reach/*.yaml")
	if err != nil || len(files) != 6 {
		t.Fatalf("examples %v %v", files, err)
	}
	for _, f := range files {
		cmd := ns.Command(harness.Binary(t), "check-config", "--config", f)
		cmd.Env = testutil.IsolatedEnv("GODEBUG=netdns=go")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "configuration OK") {
			t.Errorf("pvans check-config --config %s: %v\n%s", f, err, out)
			continue
		}
		if !strings.Contains(string(out), "file "+f) {
			t.Errorf("%s: no setting taken from the file:\n%s", f, out)
		}
	}
}
