package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/insight"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

// oneServer is a registry with one listed server holding one name.
type oneServer struct {
	s registry.ServerInfo
	n registry.NameInfo
}

func (r *oneServer) View() registry.View {
	return registry.View{Revision: 1, Servers: []registry.ServerInfo{r.s}, Counts: registry.Counts{Servers: 1, Names: 1}}
}
func (r *oneServer) Revision() (uint64, <-chan struct{}) { return 1, nil }
func (r *oneServer) Server(g pva.GUID) (registry.ServerInfo, bool) {
	return r.s, g == r.s.GUID
}
func (r *oneServer) NamesContext(_ context.Context, glob string, limit int) ([]registry.NameInfo, error) {
	if ok, _ := path.Match(glob, r.n.Name); ok && limit > 0 {
		return []registry.NameInfo{r.n}, nil
	}
	return nil, nil
}
func (r *oneServer) Name(name string) (registry.NameInfo, bool) { return r.n, name == r.n.Name }

var routeHeading = regexp.MustCompile(`(?m)^### (GET|POST|PUT|DELETE) (/\S*)$`)

// TestAPIDocRoutesAreServed sends each endpoint docs/api.md documents to
// the real handler, with the documented method, and expects a 2xx answer.
func TestAPIDocRoutesAreServed(t *testing.T) {
	g := pva.GUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	ep := netip.MustParseAddrPort("127.0.0.1:5075")
	reg := &oneServer{
		s: registry.ServerInfo{GUID: g, Addr: ep, Protocol: "tcp", Discovered: registry.SourceBeacon, ProbeState: registry.ProbeListed, Names: 1, Held: 1, Verified: true},
		n: registry.NameInfo{Name: "LN:GUN:V", GUID: g, Addr: ep, How: registry.SourceProbe, At: time.Now()},
	}
	discovered := 0
	h := httpapi.Handler(httpapi.Options{
		Registry: reg, Events: events.New(4), Version: "test", Started: time.Now(),
		Insight:  insight.New(insight.Options{Names: 10, Clients: 10}),
		Metrics:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("# metrics\n")) }),
		Ready:    func() (bool, string) { return true, "" },
		Discover: func() error { discovered++; return nil },
	})
	doc := readRepoFile(t, "docs/api.md")
	routes := routeHeading.FindAllStringSubmatch(doc, -1)
	if len(routes) < 10 {
		t.Fatalf("docs/api.md documents %d endpoints; want every one as a '### METHOD /path' heading", len(routes))
	}
	seen := map[string]bool{}
	for _, r := range routes {
		method, target := r[1], r[2]
		seen[target] = true
		target = strings.NewReplacer("{guid}", g.String(), "{name}", reg.n.Name, "GLOB", "LN:*", "=N", "=5").Replace(target)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, "http://127.0.0.1"+target, nil) // the Host check: host.go
		if method == "POST" {
			req.Header.Set("Content-Type", "application/json") // POST /v1/discover is not a simple request
		}
		h.ServeHTTP(rec, req)
		if rec.Code < 200 || rec.Code > 299 {
			t.Errorf("%s %s (documented as %s %s): status %d: %s", method, target, r[1], r[2], rec.Code, rec.Body)
		}
	}
	if discovered != 1 {
		t.Errorf("POST /v1/discover reached Discover %d times", discovered)
	}
	// The routes the daemon's tools and probes depend on must stay documented.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/v1/servers", "/v1/names/{name}", "/v1/duplicates", "/v1/discover"} {
		if !seen[p] {
			t.Errorf("docs/api.md does not document %s", p)
		}
	}
}

var jsonBlock = regexp.MustCompile("(?s)```json\n(.*?)```")

// TestAPIDocExamples decodes every JSON example in docs/api.md strictly
// into one of the API's own types, checks each JSON field of those types is
// documented, and that every probe state and source the registry can
// report is explained.
func TestAPIDocExamples(t *testing.T) {
	doc := readRepoFile(t, "docs/api.md")
	candidates := []func() any{
		func() any { return new([]httpapi.Server) },
		func() any { return new(httpapi.Server) },
		func() any { return new([]httpapi.Name) },
		func() any { return new(httpapi.Name) },
		func() any { return new([]httpapi.Duplicate) },
		func() any { return new([]events.Event) },
		func() any { return new(httpapi.Error) },
		func() any { return new(insight.UnresolvedReport) },
		func() any { return new(insight.ClientsReport) },
		func() any { return new(struct{ Status string }) },
		func() any { return new(httpapi.Changes) },
	}
	blocks := jsonBlock.FindAllStringSubmatch(doc, -1)
	if len(blocks) == 0 {
		t.Fatal("docs/api.md has no ```json examples")
	}
	for i, b := range blocks {
		fits := false
		for _, mk := range candidates {
			dec := json.NewDecoder(bytes.NewReader([]byte(b[1])))
			dec.DisallowUnknownFields()
			if dec.Decode(mk()) == nil {
				fits = true
				break
			}
		}
		if !fits {
			t.Errorf("docs/api.md JSON example %d is not an API answer (unknown field or wrong type):\n%s", i+1, b[1])
		}
	}
	for _, v := range []any{httpapi.Server{}, httpapi.Name{}, httpapi.Duplicate{}, events.Event{}, httpapi.Error{}, httpapi.Changes{},
		insight.Report{}, insight.Unresolved{}, insight.TopClient{}, insight.Client{}} {
		rt := reflect.TypeOf(v)
		for i := 0; i < rt.NumField(); i++ {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" && !strings.Contains(doc, `"`+name+`"`) {
				t.Errorf("docs/api.md: field %q of %s is in no example", name, rt.Name())
			}
		}
	}
	for p := registry.ProbeState(0); p.String() != "invalid"; p++ {
		if !strings.Contains(doc, "`"+p.String()+"`") {
			t.Errorf("docs/api.md does not explain probe_state %q", p)
		}
	}
	for s := registry.Source(1); s.String() != "invalid"; s++ {
		if !strings.Contains(doc, "`"+s.String()+"`") {
			t.Errorf("docs/api.md does not explain source %q", s)
		}
	}
}
