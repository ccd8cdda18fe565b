package daemon

import (
	"io"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/pvans-project/pvans/internal/testutil"
)

// The metric names operators, the dashboard and the alerts rely on are the
// table in docs/operations.md; the running daemon must export exactly
// those pvans_* families, no fewer and no more.
func TestMetricsMatchOperationsDoc(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(pvans_[a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	if len(documented) < 20 {
		t.Fatalf("found only %d documented metrics; table format changed?", len(documented))
	}
	// One search destination and one (absent) upstream name server, so the
	// per-destination families have series.
	c := testConfig(t, netip.AddrPortFrom(lo, testutil.FreeUDPPort(t)))
	c.PVA.NameServers = []netip.AddrPort{netip.AddrPortFrom(lo, testutil.FreeTCPPort(t))}
	d := startDaemon(t, c)
	resp, err := http.Get("http://" + d.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	exported := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (pvans_[a-z_]+) `).FindAllStringSubmatch(string(body), -1) {
		exported[m[1]] = true
	}
	for name := range documented {
		if !exported[name] {
			t.Errorf("documented metric %s is not exported", name)
		}
	}
	for name := range exported {
		if !documented[name] {
			t.Errorf("exported metric %s is not in docs/operations.md", name)
		}
	}
	if !strings.Contains(string(body), `pvans_probe_total{result="refused"} 0`) {
		t.Error("probe results not pre-populated")
	}
}

// count reads one series of the daemon's metrics, named as the scrape
// prints it: how these tests read the parts' counters.
func count(t testing.TB, d *Daemon, series string) uint64 {
	t.Helper()
	v, err := d.Metrics.Value(series)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(v)
}
