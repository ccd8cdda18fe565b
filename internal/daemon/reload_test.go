package daemon

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/testutil"
)

// TestEverySettingClassified: every setting is either applied by a reload
// (and says where) or on config's restart-only list, never both, never
// neither, so a new setting cannot be silently ignored by a reload.
func TestEverySettingClassified(t *testing.T) {
	keys := map[string]bool{}
	for _, k := range config.Keys() {
		keys[k] = true
		restart, _ := config.NeedsRestart(k)
		_, app := appliedBy[k]
		switch {
		case restart && app:
			t.Errorf("%s is both restart-only and applied by reload", k)
		case !restart && !app:
			t.Errorf("%s is neither applied by reload (internal/daemon/reload.go appliedBy) nor restart-only (config restartOnly)", k)
		}
	}
	for k := range appliedBy {
		if !keys[k] {
			t.Errorf("appliedBy names %q, which is not a setting", k)
		}
	}
}

// In-process: a reload denying the TCP client closes its open connection
// and refuses the next one; a changed restart-only setting is reported and
// changes nothing; search-through off and on again.
func TestReloadInProcess(t *testing.T) {
	c := testConfig(t)
	d := startDaemon(t, c)
	cl := query(t, d)
	if err := cl.Search([]string{"nobody:has:this"}); err != nil {
		t.Fatal(err)
	}
	next := *c
	next.Access.TCPClientDeny = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	next.PVA.ServerPort++
	next.Search.Through = false
	applied, restart := d.Reload(&next)
	if !slices.Contains(applied, "access.tcp_client_deny") || !slices.Contains(applied, "search.through") ||
		slices.Contains(applied, "pva.server_port") || !slices.Equal(restart, []string{"pva.server_port"}) {
		t.Fatalf("applied %v, needs restart %v", applied, restart)
	}
	select {
	case <-cl.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("open connection of a newly denied client not closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c2, err := nsclient.Dial(ctx, d.tcpAddr()); err == nil {
		select {
		case <-c2.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("new connection of a denied client not closed")
		}
	}
	if d.TCP.Addrs()[0].Port() != c.PVA.ServerPort {
		t.Fatal("restart-only port changed while running")
	}

	back := *c
	applied, restart = d.Reload(&back)
	if len(restart) != 0 || !slices.Contains(applied, "search.through") {
		t.Fatalf("reload back: applied %v, needs restart %v", applied, restart)
	}
	cl = query(t, d)
	if err := cl.Search([]string{"still:nobody"}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "name handed to the search ring", func() bool { return d.Ring.Stats().Searching > 0 })
}
