package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/insight"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

// stagingBytes is the production staging (config.Defaults): these tests
// stage up to thousands of searches between digests.
var stagingBytes = insight.DefaultQueueBytes

// searchAs records one search for names by client as the answer path
// would: an encoded CMD_SEARCH, decoded, its names views into the payload.
func searchAs(t testing.TB, in *insight.Insight, client string, tcp bool, missing []int, found int, names ...string) {
	t.Helper()
	s := pva.Search{Seq: 1}
	for i, n := range names {
		s.Names = append(s.Names, pva.SearchName{CID: uint32(i), Name: []byte(n)})
	}
	h, payload, _, err := pva.SplitMessage(pva.AppendSearch(nil, pva.FlagBigEndian, &s))
	if err != nil {
		t.Fatal(err)
	}
	var d pva.Search
	if err := d.Decode(payload, h.BigEndian()); err != nil {
		t.Fatal(err)
	}
	in.Searched(netip.MustParseAddr(client), tcp, payload, d.Names, missing, found)
}

// insightSite is a site with one server holding ioc:a:temp, and three
// clients searching for missing names at different rates for 20 s:
// 10.0.0.7 for ioc:typo 40/s (UDP), 10.0.0.8 for ioc:retired 15/s (TCP),
// 10.0.0.9 for ioc:typo and ioc:later 3/s each (UDP); each search also asks
// for the held ioc:a:temp.
func insightSite(t *testing.T) (*fakeReg, *insight.Insight, *clock.Fake) {
	clk := clock.NewFake(time.Now().Truncate(time.Hour))
	reg := &fakeReg{
		servers: []registry.ServerInfo{{GUID: g1, Addr: a1, Protocol: "tcp", Names: 1, Held: 1, Verified: true, ProbeState: registry.ProbeListed}},
		names:   []registry.NameInfo{{Name: "ioc:a:temp", GUID: g1, Addr: a1, How: registry.SourceProbe, At: clk.Now().Add(-time.Hour)}},
	}
	in := insight.New(insight.Options{QueueBytes: stagingBytes, Names: 100, Clients: 100, Clock: clk,
		Known: func(n string) bool { _, ok := reg.Name(n); return ok }})
	for range 20 {
		for range 40 {
			searchAs(t, in, "10.0.0.7", false, []int{1}, 1, "ioc:a:temp", "ioc:typo")
		}
		for range 15 {
			searchAs(t, in, "10.0.0.8", true, []int{1}, 1, "ioc:a:temp", "ioc:retired")
		}
		for range 3 {
			searchAs(t, in, "10.0.0.9", false, []int{1, 2}, 1, "ioc:a:temp", "ioc:typo", "ioc:later")
		}
		in.Flush()
		clk.Advance(time.Second)
	}
	return reg, in, clk
}

func iget(t *testing.T, h http.Handler, target string, into any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1"+target, nil))
	if s, ok := into.(*string); ok {
		*s = rec.Body.String()
	} else if into != nil && rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), into); err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
	}
	return rec.Code
}

// Three clients searching for missing names at different rates: the API
// and the status page rank them right, within the reported error bound,
// and a name that a server starts serving drops out of "unresolved".
func TestInsightSimulatedSite(t *testing.T) {
	reg, in, _ := insightSite(t)
	h := Handler(Options{Registry: reg, Insight: in, Version: "test", Ready: func() (bool, string) { return true, "" }})

	truth := map[string]uint64{"ioc:typo": 20 * (40 + 3), "ioc:retired": 20 * 15, "ioc:later": 20 * 3}
	for _, w := range []string{"1m", "1h"} {
		var rep insight.UnresolvedReport
		if code := iget(t, h, "/v1/insight/unresolved?window="+w, &rep); code != http.StatusOK {
			t.Fatalf("window %s: status %d", w, code)
		}
		var got []string
		for _, u := range rep.Names {
			got = append(got, u.Name)
			if d := diff(u.Searches, truth[u.Name]); d > u.MaxError || d > rep.ErrorBound {
				t.Errorf("%s %s: %d searches, true %d, max_error %d, bound %d", w, u.Name, u.Searches, truth[u.Name], u.MaxError, rep.ErrorBound)
			}
		}
		if fmt.Sprint(got) != "[ioc:typo ioc:retired ioc:later]" {
			t.Errorf("window %s ranking %v", w, got)
		}
		if typo := rep.Names[0]; typo.Clients != 2 || len(typo.TopClients) != 2 || typo.TopClients[0].Addr != "10.0.0.7" {
			t.Errorf("ioc:typo: %+v", typo)
		}
	}
	var cr insight.ClientsReport
	iget(t, h, "/v1/insight/clients?window=1m&limit=2", &cr)
	if len(cr.Clients) != 2 || cr.Clients[0].Addr != "10.0.0.7" || cr.Clients[1].Addr != "10.0.0.8" {
		t.Fatalf("clients %+v", cr.Clients)
	}
	if c := cr.Clients[1]; c.Transport != "tcp" || c.NotFoundShare != 0.5 || c.SearchesPerSecond != 15 {
		t.Errorf("10.0.0.8: %+v", c)
	}

	var page string
	iget(t, h, "/", &page)
	for _, want := range []string{`id="unresolved-table"`, `id="client-table"`, `id="lookup"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	inOrder(t, page, "ioc:typo", "ioc:retired", "ioc:later")
	clients := page[strings.Index(page, `id="client-table"`):]
	inOrder(t, clients, "10.0.0.7", "10.0.0.8", "10.0.0.9")

	iget(t, h, "/?name="+url.QueryEscape("ioc:retired"), &page)
	if !strings.Contains(page, "searched 300 times by 1 client(s) in the last hour") {
		t.Errorf("lookup of ioc:retired: %s", between(page, `id="lookup-answer"`, "</div>"))
	}
	iget(t, h, "/?name=ioc:a:temp", &page)
	if a := between(page, `id="lookup-answer"`, "</div>"); !strings.Contains(a, "is served by") || !strings.Contains(a, a1.String()) || !strings.Contains(a, "no duplicates") {
		t.Errorf("lookup of ioc:a:temp: %s", a)
	}
	iget(t, h, "/?name=ioc:never", &page)
	if a := between(page, `id="lookup-answer"`, "</div>"); !strings.Contains(a, "nobody searched for it") {
		t.Errorf("lookup of ioc:never: %s", a)
	}

	// ioc:later appears on a server: it leaves "unresolved" at once, in the
	// API and on the page, and the lookup box says who serves it.
	reg.names = append(reg.names, registry.NameInfo{Name: "ioc:later", GUID: g1, Addr: a1, How: registry.SourceSearchThrough, At: time.Now()})
	var rep insight.UnresolvedReport
	iget(t, h, "/v1/insight/unresolved?window=1h", &rep)
	for _, u := range rep.Names {
		if u.Name == "ioc:later" {
			t.Error("ioc:later still unresolved after a server claimed it")
		}
	}
	iget(t, h, "/", &page)
	if strings.Contains(between(page, `id="unresolved-table"`, "</table>"), "ioc:later") {
		t.Error("page still lists ioc:later as not found")
	}
}

func TestInsightAPIErrors(t *testing.T) {
	_, in, _ := insightSite(t)
	h := Handler(Options{Registry: &fakeReg{}, Insight: in})
	for target, want := range map[string]int{
		"/v1/insight/unresolved?window=5m":     http.StatusBadRequest,
		"/v1/insight/unresolved?limit=0":       http.StatusBadRequest,
		"/v1/insight/clients?limit=x":          http.StatusBadRequest,
		"/v1/insight/clients?window=1m":        http.StatusOK,
		"/v1/insight/unresolved?limit=1000000": http.StatusOK,
	} {
		if code := iget(t, h, target, nil); code != want {
			t.Errorf("GET %s: %d, want %d", target, code, want)
		}
	}
	off := Handler(Options{Registry: &fakeReg{}})
	if code := iget(t, off, "/v1/insight/clients", nil); code != http.StatusServiceUnavailable {
		t.Errorf("without insight: %d", code)
	}
	// The lookup box bounds what it echoes back.
	var page string
	iget(t, h, "/?name="+strings.Repeat("x", 5000), &page)
	if !strings.Contains(page, "longer than 500 bytes") || strings.Contains(page, strings.Repeat("x", 600)) {
		t.Error("an over-long lookup is not refused and bounded")
	}
}

// limit is capped at MaxInsightLimit.
func TestInsightLimitCapped(t *testing.T) {
	in := insight.New(insight.Options{QueueBytes: stagingBytes, Names: 2000, Clients: 10, Clock: clock.NewFake(time.Time{})})
	for i := range 1500 {
		searchAs(t, in, "10.0.0.1", false, []int{0}, 0, fmt.Sprintf("missing:%d", i))
	}
	h := Handler(Options{Registry: &fakeReg{}, Insight: in})
	var rep insight.UnresolvedReport
	iget(t, h, "/v1/insight/unresolved?limit=5000", &rep)
	if len(rep.Names) != MaxInsightLimit {
		t.Errorf("%d names returned, want the cap %d", len(rep.Names), MaxInsightLimit)
	}
}

func inOrder(t *testing.T, s string, words ...string) {
	t.Helper()
	last := -1
	for _, w := range words {
		i := strings.Index(s, w)
		if i < 0 || i < last {
			t.Errorf("%q missing or out of order (want %v)", w, words)
			return
		}
		last = i
	}
}

func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.Index(s, to); j >= 0 {
		return s[:j]
	}
	return s
}

func diff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}
