package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/insight"
	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

func httpGet(t *testing.T, d *Daemon, path string) string {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + d.HTTPAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", path, resp.Status, b)
	}
	return string(b)
}

func unresolved(t *testing.T, d *Daemon, window string) insight.UnresolvedReport {
	var r insight.UnresolvedReport
	if err := json.Unmarshal([]byte(httpGet(t, d, "/v1/insight/unresolved?window="+window)), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// A simulated site (one server holding held:pv) and three TCP clients on
// 127.0.0.7, .8 and .9 searching for missing names at different rates: the
// API and the status page rank names and clients correctly within the
// reported error bound; a name that a new server then serves drops out of
// "unresolved", and the lookup box says who serves it.
func TestInsightSimulatedSiteAndClients(t *testing.T) {
	c := testConfig(t)
	c.Search.Through = false
	d := startDaemon(t, c)
	startSite(t, sim.Options{Names: [][]string{{"held:pv"}}, Host: lo, BeaconDests: []netip.AddrPort{d.udpAddr()}})
	testutil.WaitFor(t, 10*time.Second, "held:pv listed", func() bool { return d.Registry.Lookup([]byte("held:pv")) != nil })

	type load struct {
		from   string
		n      int
		search []string
	}
	loads := []load{
		{"127.0.0.7", 60, []string{"typo:one", "held:pv"}},
		{"127.0.0.8", 25, []string{"retired:two"}},
		{"127.0.0.9", 5, []string{"typo:one", "later:three"}},
	}
	for _, l := range loads {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cl, err := nsclient.DialWith(ctx, d.tcpAddr(), nsclient.Options{From: netip.MustParseAddr(l.from)})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		for range l.n {
			if err := cl.Search(l.search); err != nil {
				t.Fatal(err)
			}
		}
	}
	truth := map[string]uint64{"typo:one": 65, "retired:two": 25, "later:three": 5}
	testutil.WaitFor(t, 20*time.Second, "every search counted", func() bool {
		r := unresolved(t, d, "1m")
		return r.Counted == 95
	})
	for _, w := range []string{"1m", "1h"} {
		r := unresolved(t, d, w)
		var got []string
		for _, u := range r.Names {
			got = append(got, u.Name)
			if diff := int64(u.Searches) - int64(truth[u.Name]); diff > int64(r.ErrorBound) || -diff > int64(r.ErrorBound) {
				t.Errorf("%s %s: %d searches, true %d, bound %d", w, u.Name, u.Searches, truth[u.Name], r.ErrorBound)
			}
		}
		if fmt.Sprint(got) != "[typo:one retired:two later:three]" {
			t.Errorf("window %s: unresolved ranked %v", w, got)
		}
	}
	var cr insight.ClientsReport
	if err := json.Unmarshal([]byte(httpGet(t, d, "/v1/insight/clients?window=1m")), &cr); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, c := range cr.Clients {
		addrs = append(addrs, c.Addr)
		if c.Transport != "tcp" {
			t.Errorf("%s over %s, want tcp", c.Addr, c.Transport)
		}
	}
	if fmt.Sprint(addrs) != "[127.0.0.7 127.0.0.8 127.0.0.9]" || cr.Clients[0].NotFoundShare != 0.5 || cr.Clients[1].NotFoundShare != 1 {
		t.Errorf("clients %+v", cr.Clients)
	}
	page := httpGet(t, d, "/")
	order(t, page[strings.Index(page, `id="unresolved-table"`):], "typo:one", "retired:two", "later:three")
	order(t, page[strings.Index(page, `id="client-table"`):], "127.0.0.7", "127.0.0.8", "127.0.0.9")

	// later:three appears on a new server: it leaves "unresolved".
	startSite(t, sim.Options{Names: [][]string{{"later:three"}}, Host: lo, BeaconDests: []netip.AddrPort{d.udpAddr()}})
	testutil.WaitFor(t, 10*time.Second, "later:three listed", func() bool { return d.Registry.Lookup([]byte("later:three")) != nil })
	for _, u := range unresolved(t, d, "1h").Names {
		if u.Name == "later:three" {
			t.Error("later:three still unresolved after a server claimed it")
		}
	}
	page = httpGet(t, d, "/?name="+url.QueryEscape("later:three"))
	if a := page[strings.Index(page, `id="lookup-answer"`):]; !strings.Contains(a[:min(len(a), 600)], "is served by") {
		t.Errorf("lookup of later:three: %.600s", a)
	}
	if strings.Contains(page[strings.Index(page, `id="unresolved-table"`):strings.Index(page, `id="client-table"`)], "later:three") {
		t.Error("the page still lists later:three as not found")
	}
	if got := d.Insight.Totals(); got.Found != 60 || got.NotFound != 95 {
		t.Errorf("totals %+v, want 60 found, 95 not found", got)
	}
}

func order(t *testing.T, s string, words ...string) {
	t.Helper()
	last := -1
	for _, w := range words {
		i := strings.Index(s, w)
		if i < 0 || i < last {
			t.Errorf("%q missing or out of order, want %v", w, words)
			return
		}
		last = i
	}
}

// Beacons from a server outside access.server_allow are ignored, and make
// one "anomaly: not_allowed" event (not one per beacon).
func TestNotAllowedBeaconAnomaly(t *testing.T) {
	c := testConfig(t)
	c.Search.Through = false
	c.Access.ServerAllow = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	d := startDaemon(t, c)
	startSite(t, sim.Options{Names: [][]string{{"outside:pv"}}, Host: lo, BeaconDests: []netip.AddrPort{d.udpAddr()},
		BeaconInterval: 50 * time.Millisecond})
	count := func() int {
		n := 0
		for _, e := range d.Events.Recent(500) {
			if e.Kind == "anomaly: "+insight.AnomalyNotAllowed {
				n++
			}
		}
		return n
	}
	testutil.WaitFor(t, 10*time.Second, "not_allowed anomaly event", func() bool { return count() > 0 })
	time.Sleep(500 * time.Millisecond) // more beacons arrive meanwhile
	if n := count(); n != 1 {
		t.Errorf("%d not_allowed events, want 1 (at most one an hour per address)", n)
	}
	if d.Registry.Lookup([]byte("outside:pv")) != nil {
		t.Error("a server outside the allow list was registered")
	}
}

// A server whose beacons stop while pvans's TCP watch on it still answers
// is kept (the trust rule) and reported as an "anomaly: beacons_stopped" event.
func TestBeaconsStoppedAnomaly(t *testing.T) {
	c := testConfig(t)
	c.Search.Through = false
	c.Beacon.Expiry = time.Second // checked every 250 ms (beacon.CheckEvery)
	d := startDaemon(t, c)
	site := startSite(t, sim.Options{Names: [][]string{{"quiet:pv"}}, Host: lo})
	if err := site.Beacon(0, d.udpAddr()); err != nil { // one beacon, then silence
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "quiet:pv listed", func() bool { return d.Registry.Lookup([]byte("quiet:pv")) != nil })
	testutil.WaitFor(t, 10*time.Second, "beacons_stopped event", func() bool {
		for _, e := range d.Events.Recent(500) {
			if e.Kind == "anomaly: "+insight.AnomalyBeaconsStopped && e.Endpoint == site.Server(0).TCP.String() {
				return true
			}
		}
		return false
	})
	if d.Registry.Lookup([]byte("quiet:pv")) == nil {
		t.Error("the watched server's names left the registry")
	}
}

// A server restarting (new GUID at the same endpoint) more often than
// insight.DefaultGUIDChangesPerHour is reported once as "anomaly: guid_churn".
func TestGUIDChurnAnomaly(t *testing.T) {
	c := testConfig(t)
	c.Search.Through = false
	d := startDaemon(t, c)
	site := startSite(t, sim.Options{Names: [][]string{{"loop:pv"}}, Host: lo, BeaconDests: []netip.AddrPort{d.udpAddr()},
		BeaconInterval: 50 * time.Millisecond})
	churn := func() int {
		n := 0
		for _, e := range d.Events.Recent(500) {
			if e.Kind == "anomaly: "+insight.AnomalyGUIDChurn {
				n++
			}
		}
		return n
	}
	limit := insight.DefaultGUIDChangesPerHour
	for i := range limit + 2 {
		prev := site.Server(0).GUID
		testutil.WaitFor(t, 10*time.Second, "server listed", func() bool {
			s, ok := d.Registry.Server(prev)
			return ok && s.Names > 0
		})
		if i == limit+1 {
			break
		}
		if n := churn(); n != 0 {
			t.Fatalf("guid_churn reported after %d changes; the limit is %d", i, limit)
		}
		if err := site.Restart(0); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "guid_churn event", func() bool { return churn() == 1 })
}
