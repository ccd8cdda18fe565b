package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

type fakeReg struct {
	servers []registry.ServerInfo
	names   []registry.NameInfo
	dups    []registry.Duplicate
	rev     uint64
	changed chan struct{} // nil: the registry never changes
}

// View counts servers, names and duplicates, and no unverified server.
func (f *fakeReg) View() registry.View {
	return registry.View{Revision: f.rev, Changed: f.changed,
		Servers:    append([]registry.ServerInfo(nil), f.servers...),
		Duplicates: append([]registry.Duplicate(nil), f.dups...),
		Counts:     registry.Counts{Servers: len(f.servers), Names: len(f.names), DuplicateNames: len(f.dups)}}
}
func (f *fakeReg) Revision() (uint64, <-chan struct{}) { return f.rev, f.changed }
func (f *fakeReg) Server(g pva.GUID) (registry.ServerInfo, bool) {
	for _, s := range f.servers {
		if s.GUID == g {
			return s, true
		}
	}
	return registry.ServerInfo{}, false
}
func (f *fakeReg) NamesContext(_ context.Context, glob string, limit int) ([]registry.NameInfo, error) {
	var out []registry.NameInfo
	for _, n := range f.names {
		if ok, _ := path.Match(glob, n.Name); ok && len(out) < limit {
			out = append(out, n)
		}
	}
	return out, nil
}
func (f *fakeReg) Name(name string) (registry.NameInfo, bool) {
	for _, n := range f.names {
		if n.Name == name {
			return n, true
		}
	}
	return registry.NameInfo{}, false
}

var (
	g1 = pva.GUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	g2 = pva.GUID{12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	a1 = netip.MustParseAddrPort("127.0.0.1:5075")
	a2 = netip.MustParseAddrPort("127.0.0.2:5085")
)

func newTestAPI() (*httptest.Server, *bool, *int) {
	reg := &fakeReg{
		servers: []registry.ServerInfo{
			{GUID: g1, Addr: a1, Protocol: "tcp", Discovered: registry.SourceBeacon, ProbeState: registry.ProbeListed, Names: 2, Held: 2, Verified: true},
			{GUID: g2, Addr: a2, Protocol: "tcp", Discovered: registry.SourceDiscovery, ProbeState: registry.ProbeFailed, ProbeError: "refused", Verified: true},
		},
		names: []registry.NameInfo{{Name: "ioc:a:temp", GUID: g1, Addr: a1, How: registry.SourceProbe}, {Name: "ioc:a:press", GUID: g1, Addr: a1, How: registry.SourceProbe}},
		dups:  []registry.Duplicate{{Name: "ioc:a:temp", Holder: g1, HolderAddr: a1, Claimant: g2, ClaimantAddr: a2}},
	}
	ready := false
	discovers := 0
	ev := events.New(10)
	ev.Add(events.Event{At: time.Now(), Kind: "appeared", GUID: g1.String(), Endpoint: a1.String()})
	h := Handler(Options{Registry: reg, Events: ev, Version: "test",
		Limits: Limits{DiscoverInterval: time.Nanosecond}, // rate limit: bounds_test.go
		Ready:  func() (bool, string) { return ready, "first discovery round pending" },
		Discover: func() error {
			discovers++
			if discovers > 1 {
				return errors.New("socket closed")
			}
			return nil
		},
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "pvans_up 1\n") }),
	})
	return httptest.NewServer(h), &ready, &discovers
}

func get(t *testing.T, url string, wantCode int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantCode {
		t.Fatalf("GET %s: %d %s, want %d", url, resp.StatusCode, b, wantCode)
	}
	return string(b)
}

func TestEndpoints(t *testing.T) {
	srv, ready, discovers := newTestAPI()
	defer srv.Close()
	u := srv.URL
	if get(t, u+"/healthz", 200) != "ok\n" {
		t.Fatal("healthz body")
	}
	if b := get(t, u+"/readyz", 503); !strings.Contains(b, "first discovery round pending") {
		t.Fatalf("readyz body %q", b)
	}
	*ready = true
	get(t, u+"/readyz", 200)

	var ss []Server
	if err := json.Unmarshal([]byte(get(t, u+"/v1/servers", 200)), &ss); err != nil {
		t.Fatal(err)
	}
	if len(ss) != 2 || ss[0].GUID != g1.String() || ss[0].Endpoint != "127.0.0.1:5075" || ss[1].ProbeError != "refused" {
		t.Fatalf("servers %+v", ss)
	}
	var s Server
	if err := json.Unmarshal([]byte(get(t, u+"/v1/servers/"+g2.String(), 200)), &s); err != nil || s.Endpoint != a2.String() || s.Discovered != "discovery" {
		t.Fatalf("server %+v %v", s, err)
	}
	get(t, u+"/v1/servers/zz", 400)
	get(t, u+"/v1/servers/"+pva.GUID{}.String(), 404)

	var ns []Name
	if err := json.Unmarshal([]byte(get(t, u+"/v1/names?match=ioc:a:t*", 200)), &ns); err != nil || len(ns) != 1 || ns[0].Name != "ioc:a:temp" {
		t.Fatalf("names %+v %v", ns, err)
	}
	if err := json.Unmarshal([]byte(get(t, u+"/v1/names?limit=1", 200)), &ns); err != nil || len(ns) != 1 {
		t.Fatalf("limit: %+v", ns)
	}
	get(t, u+"/v1/names?limit=x", 400)
	var n Name
	if err := json.Unmarshal([]byte(get(t, u+"/v1/names/ioc:a:press", 200)), &n); err != nil || n.GUID != g1.String() || n.How != "probe" {
		t.Fatalf("name %+v", n)
	}
	get(t, u+"/v1/names/nope", 404)
	var ds []Duplicate
	if err := json.Unmarshal([]byte(get(t, u+"/v1/duplicates", 200)), &ds); err != nil || len(ds) != 1 || ds[0].ClaimantEndpoint != a2.String() {
		t.Fatalf("dups %+v", ds)
	}
	if !strings.Contains(get(t, u+"/v1/events", 200), "appeared") {
		t.Fatal("events")
	}
	if get(t, u+"/metrics", 200) != "pvans_up 1\n" {
		t.Fatal("metrics")
	}
	for i, code := range []int{202, 500} {
		time.Sleep(time.Millisecond)
		resp, err := http.Post(u+"/v1/discover", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != code || *discovers != i+1 {
			t.Fatalf("discover %d: %d", i, resp.StatusCode)
		}
	}
	get(t, u+"/v1/discover", 405)

	page := get(t, u+"/", 200)
	for _, want := range []string{"127.0.0.1:5075", "probe failed", "ioc:a:temp", "appeared", "ready"} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
}

// ?client=ADDR adds what that client is told, from Options.Told: an
// endpoint, "any", or nothing and why; the TLS view only when it says
// something else.
func TestNameToldClient(t *testing.T) {
	reg := &fakeReg{names: []registry.NameInfo{{Name: "ioc:a:temp", GUID: g1, Addr: a1, How: registry.SourceProbe}}}
	var asked netip.Addr
	var askedName string
	h := Handler(Options{Registry: reg, Told: func(name string, client netip.Addr, tls bool) Claimed {
		asked, askedName = client, name
		switch {
		case client == netip.MustParseAddr("10.9.9.9"):
			return Claimed{Withheld: "zero_endpoint"}
		case client.IsLoopback():
			return Claimed{Addr: pva.AddressFrom(a1.Addr()), Port: a1.Port(), Protocol: "tcp"}
		}
		return Claimed{Addr: pva.AnyIPv4, Port: a1.Port(), Protocol: "tcp"}
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	var n Name
	if err := json.Unmarshal([]byte(get(t, srv.URL+"/v1/names/ioc:a:temp?client=127.0.0.9", 200)), &n); err != nil ||
		n.Told == nil || *n.Told != (Told{Client: "127.0.0.9", Endpoint: a1.String(), Port: a1.Port(), Protocol: "tcp"}) ||
		asked != netip.MustParseAddr("127.0.0.9") || askedName != "ioc:a:temp" {
		t.Fatalf("local client: %+v %v", n.Told, err)
	}
	n = Name{}
	if err := json.Unmarshal([]byte(get(t, srv.URL+"/v1/names/ioc:a:temp?client=10.1.2.3", 200)), &n); err != nil ||
		n.Told == nil || *n.Told != (Told{Client: "10.1.2.3", Any: true, Port: a1.Port(), Protocol: "tcp"}) {
		t.Fatalf("remote client: %+v %v", n.Told, err)
	}
	n = Name{}
	if err := json.Unmarshal([]byte(get(t, srv.URL+"/v1/names/ioc:a:temp?client=10.9.9.9", 200)), &n); err != nil ||
		n.Told == nil || *n.Told != (Told{Client: "10.9.9.9", Withheld: "zero_endpoint"}) {
		t.Fatalf("withheld: %+v %v", n.Told, err)
	}
	n = Name{}
	if err := json.Unmarshal([]byte(get(t, srv.URL+"/v1/names/ioc:a:temp", 200)), &n); err != nil || n.Told != nil {
		t.Fatalf("no client: %+v %v", n.Told, err)
	}
	get(t, srv.URL+"/v1/names/ioc:a:temp?client=nobody", 400)
}
