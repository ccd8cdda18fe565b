package daemon

import (
	"bufio"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/logging"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// logLines returns the JSON log lines in buf with message msg.
func logLines(t *testing.T, buf *testutil.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func startLoggedDaemon(t *testing.T, c *config.Config) (*Daemon, *testutil.Buffer) {
	t.Helper()
	buf := &testutil.Buffer{}
	l, _, err := logging.NewTo(buf, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(c, Options{Logger: l, TestBounds: fast})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d, buf
}

// one fails unless exactly one line of msg names guid, and returns it.
func one(t *testing.T, buf *testutil.Buffer, msg, guid string) map[string]any {
	t.Helper()
	var got []map[string]any
	for _, m := range logLines(t, buf, msg) {
		if m["guid"] == guid {
			got = append(got, m)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d %q lines for %s, want 1; log:\n%s", len(got), msg, guid, buf)
	}
	return got[0]
}

// The log of a site's life, as an operator tails it: one info line each
// when a server appears, is listed (names, how long the listing took),
// restarts under a new GUID, and is lost (why).
func TestServerLifeLoggedOnce(t *testing.T) {
	c := testConfig(t)
	c.Search.Through = false
	d, buf := startLoggedDaemon(t, c)
	site := startSite(t, sim.Options{Names: [][]string{{"life:1", "life:2"}}, Host: lo, BeaconDests: []netip.AddrPort{d.udpAddr()}})
	old := site.Server(0).GUID.String()
	testutil.WaitFor(t, 5*time.Second, "names registered", func() bool { return d.Registry.Counts().Names == 2 })
	if err := site.Restart(0); err != nil {
		t.Fatal(err)
	}
	nu := site.Server(0).GUID
	testutil.WaitFor(t, 5*time.Second, "new GUID holds the names", func() bool {
		h, ok := d.Registry.LookupName("life:1")
		return ok && h.GUID == nu
	})
	if err := site.Kill(0); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "server lost", func() bool { return d.Registry.Counts().Servers == 0 })
	time.Sleep(500 * time.Millisecond) // any late duplicate line

	a := one(t, buf, "server appeared", old)
	if a["level"] != "info" || a["endpoint"] != site.Server(0).TCP.String() || a["via"] != "beacon" {
		t.Errorf("appeared: %v", a)
	}
	for _, g := range []string{old, nu.String()} {
		l := one(t, buf, "server listed", g)
		if l["names"] != 2.0 {
			t.Errorf("listed: %v, want names 2", l)
		}
		if took, err := time.ParseDuration(l["took"].(string)); err != nil || took <= 0 {
			t.Errorf("listed: took %v (%v), want a Go duration", l["took"], err)
		}
	}
	if r := one(t, buf, "server restarted", nu.String()); r["old_guid"] != old {
		t.Errorf("restarted: %v, want old_guid %s", r, old)
	}
	if l := one(t, buf, "server lost", nu.String()); l["reason"] == nil || l["reason"] == "" {
		t.Errorf("lost: %v, want a reason", l)
	}
	// The old instance may be reported lost as it stops (its watch
	// closes) before the new one takes over: once at most.
	nOld := 0
	for _, m := range logLines(t, buf, "server lost") {
		if m["guid"] == old {
			nOld++
		}
	}
	if nOld > 1 {
		t.Errorf("%d \"server lost\" lines for the old instance, want at most 1", nOld)
	}
	for _, msg := range []string{"server appeared", "server restarted"} {
		if n := len(logLines(t, buf, msg)); n != 1 {
			t.Errorf("%d %q lines, want 1; log:\n%s", n, msg, buf)
		}
	}
	if s := buf.String(); strings.Contains(s, `"window":600`) {
		t.Errorf("a duration as a bare number: %s", s)
	}
}

// A snapshot load is one line, with its window as a Go duration.
func TestSnapshotLoadLoggedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.snapshot")
	c := testConfig(t)
	c.Search.Through = false
	c.Snapshot.Path = path
	first := startDaemon(t, c)
	startSite(t, sim.Options{Names: [][]string{{"snap:1"}}, Host: lo, BeaconDests: []netip.AddrPort{first.udpAddr()}})
	testutil.WaitFor(t, 5*time.Second, "name registered", func() bool { return first.Registry.Counts().Names == 1 })
	if err := first.SaveSnapshot(); err != nil {
		t.Fatal(err)
	}
	first.Close()

	c2 := testConfig(t)
	c2.Search.Through = false
	c2.Snapshot.Path = path
	_, buf := startLoggedDaemon(t, c2)
	var loads []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "snapshot loaded") {
			loads = append(loads, l)
		}
	}
	if len(loads) != 1 || !strings.Contains(loads[0], `"window":"10m0s"`) {
		t.Fatalf("snapshot load lines %q, want one with window 10m0s", loads)
	}
}
