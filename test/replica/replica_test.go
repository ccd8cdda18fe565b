// Package replica holds the high-availability test: two pvans replicas
// listed together in EPICS_PVA_NAME_SERVERS, one killed. It has no
// non-test code. Everything runs on the host's loopback on free ports;
// docs/operations.md ("High availability") describes the setup it checks.
package replica

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

// query runs `pvans query` the way an operator (or a PVXS client) lists
// replicas: every one in EPICS_PVA_NAME_SERVERS. It returns name →
// "endpoint guid" and the exit code.
func query(t *testing.T, nameServers string, names []string) (map[string]string, int, string) {
	t.Helper()
	cmd := exec.Command(harness.Binary(t), append([]string{"query", "--timeout", "10s"}, names...)...)
	cmd.Env = testutil.IsolatedEnv("EPICS_PVA_NAME_SERVERS=" + nameServers)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 5 && f[0] != "NAME" {
			got[f[0]] = f[1] + " " + f[2]
		}
	}
	return got, code, string(out)
}

// want is name → "endpoint guid" for every name of the sites.
func want(sites ...*sim.Site) map[string]string {
	m := map[string]string{}
	for _, s := range sites {
		for _, srv := range s.Servers() {
			for _, n := range srv.Names {
				m[n] = srv.TCP.String() + " " + srv.GUID.String()
			}
		}
	}
	return m
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func check(t *testing.T, when string, got, want map[string]string) {
	t.Helper()
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s: %s answered %q, want %q", when, n, got[n], w)
		}
	}
}

// Two replicas hear the same beacons and so give the same answers (the
// real server's GUID and endpoint); a client listing both keeps resolving
// every name after one is killed with SIGKILL, and a server that starts
// after the kill is found through the survivor.
func TestReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs pvans")
	}
	a := harness.Start(t, harness.Options{})
	b := harness.Start(t, harness.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	beaconTo := []netip.AddrPort{a.UDP, b.UDP}
	site, err := sim.Start(ctx, sim.Options{Servers: 2, NamesPerServer: 25, BeaconDests: beaconTo, BeaconInterval: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	all := want(site)
	nameServers := a.TCP.String() + " " + b.TCP.String()

	// Each replica alone knows every name, with the same answer.
	for _, p := range []*harness.Pvans{a, b} {
		testutil.WaitFor(t, 30*time.Second, "replica "+p.TCP.String()+" learns the site", func() bool {
			got, code, _ := query(t, p.TCP.String(), keys(all))
			return code == 0 && len(got) == len(all)
		})
		got, _, out := query(t, p.TCP.String(), keys(all))
		check(t, "replica "+p.TCP.String()+" alone", got, all)
		if t.Failed() {
			t.Fatalf("output:\n%s", out)
		}
	}
	got, code, out := query(t, nameServers, keys(all))
	if code != 0 {
		t.Fatalf("both replicas: exit %d\n%s", code, out)
	}
	check(t, "both replicas", got, all)

	a.Kill()
	<-a.Done()
	got, code, out = query(t, nameServers, keys(all))
	if code != 0 || !strings.Contains(out, "cannot reach name server "+a.TCP.String()) {
		t.Fatalf("after SIGKILL of %s: exit %d\n%s", a.TCP, code, out)
	}
	check(t, "after the kill", got, all)

	late, err := sim.Start(ctx, sim.Options{Names: [][]string{{"late:pv0", "late:pv1", "late:pv2"}},
		BeaconDests: beaconTo, BeaconInterval: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	lateWant := want(late)
	testutil.WaitFor(t, 30*time.Second, "the survivor learns a server started after the kill", func() bool {
		got, code, _ := query(t, nameServers, keys(lateWant))
		return code == 0 && len(got) == len(lateWant)
	})
	got, _, out = query(t, nameServers, append(keys(lateWant), keys(all)...))
	check(t, "late server", got, lateWant)
	check(t, "old servers, later", got, all)
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}
