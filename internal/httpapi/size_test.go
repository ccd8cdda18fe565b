package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

// forgedRows is the registry issue 39 measured: 20,000 servers with no
// names (forged beacons from 4,000 addresses reach it in ~10 s), a
// quarter of them failing their probe, and 5,000 duplicate claims.
func forgedRows() *fakeReg {
	reg := &fakeReg{}
	for i := range 20000 {
		var g pva.GUID
		g[0], g[1], g[2] = byte(i>>16), byte(i>>8), byte(i)
		s := registry.ServerInfo{GUID: g, Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 5075),
			Protocol: "tcp", Discovered: registry.SourceBeacon, LastSeen: time.Now(), Verified: true}
		if i%4 == 0 {
			s.ProbeState, s.ProbeError = registry.ProbeFailed, "timeout"
		}
		reg.servers = append(reg.servers, s)
	}
	for i := range 5000 {
		reg.dups = append(reg.dups, registry.Duplicate{Name: fmt.Sprintf("dup:%05d", i), Holder: g1, HolderAddr: a1, Claimant: g2, ClaimantAddr: a2})
	}
	return reg
}

func getRec(h http.Handler, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1"+target, nil))
	return rec
}

// TestListingsBoundedAtSize is issue 39 row 3: with 20,000 forged rows one
// GET / was 5.57 MB and /v1/servers 9.3 MB. The status page shows the
// troubled servers first up to its bound and says how many more there
// are; the lists answer a page at a time with the total in a header.
func TestListingsBoundedAtSize(t *testing.T) {
	h := Handler(Options{Registry: forgedRows()})
	page := getRec(h, "/")
	body := page.Body.String()
	if page.Code != 200 || len(body) > 512<<10 {
		t.Fatalf("GET / with 20,000 servers: %d, %d bytes; want 200 and at most 512 KiB", page.Code, len(body))
	}
	if !strings.Contains(body, strconv.Itoa(20000-MaxStatusServers)+" more servers") ||
		!strings.Contains(body, strconv.Itoa(5000-MaxStatusDuplicates)+" more duplicate claims") {
		t.Errorf("GET /: no \"N more\" where rows are cut")
	}
	if n := strings.Count(body, `<tr class="bad">`); n != MaxStatusServers {
		t.Errorf("GET /: %d failing servers shown, want the first %d rows all failing (troubled first)", n, MaxStatusServers)
	}
	t.Logf("GET / with 20,000 servers and 5,000 duplicates: %d bytes", len(body))

	for _, c := range []struct {
		path  string
		total int
	}{{"/v1/servers", 20000}, {"/v1/duplicates", 5000}} {
		rec := getRec(h, c.path)
		var rows []map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &rows); err != nil || rec.Code != 200 {
			t.Fatalf("GET %s: %d %v", c.path, rec.Code, err)
		}
		if len(rows) != DefaultListLimit || rec.Header().Get(TotalHeader) != strconv.Itoa(c.total) {
			t.Errorf("GET %s: %d rows, %s %q; want %d and %d", c.path, len(rows), TotalHeader, rec.Header().Get(TotalHeader), DefaultListLimit, c.total)
		}
		t.Logf("GET %s: %d bytes", c.path, rec.Body.Len())
		// Paging: offset and limit, the last page short; limit capped.
		rec = getRec(h, fmt.Sprintf("%s?offset=%d&limit=1000", c.path, c.total-300))
		if err := json.Unmarshal(rec.Body.Bytes(), &rows); err != nil || len(rows) != 300 {
			t.Errorf("GET %s last page: %d rows, %v; want 300", c.path, len(rows), err)
		}
		rec = getRec(h, c.path+"?limit=1000000")
		if err := json.Unmarshal(rec.Body.Bytes(), &rows); err != nil || len(rows) != min(c.total, MaxListLimit) {
			t.Errorf("GET %s?limit=1000000: %d rows; want the cap %d", c.path, len(rows), MaxListLimit)
		}
		for _, bad := range []string{"?limit=0", "?limit=x", "?offset=-1", "?offset=y"} {
			if rec := getRec(h, c.path+bad); rec.Code != 400 {
				t.Errorf("GET %s%s: %d, want 400", c.path, bad, rec.Code)
			}
		}
	}
	// Pages follow each other: the second page starts where the first
	// ended, in the documented order (endpoint, then GUID).
	var p1, p2 []Server
	_ = json.Unmarshal(getRec(h, "/v1/servers?limit=2").Body.Bytes(), &p1)
	_ = json.Unmarshal(getRec(h, "/v1/servers?offset=1&limit=2").Body.Bytes(), &p2)
	if len(p1) != 2 || len(p2) != 2 || p1[1].GUID != p2[0].GUID {
		t.Errorf("pages do not follow each other: %v / %v", p1, p2)
	}
}

// blockingReg's View waits until release is closed, and tells entered
// each time one starts.
type blockingReg struct {
	*fakeReg
	entered chan struct{}
	release chan struct{}
}

func (b blockingReg) View() registry.View {
	b.entered <- struct{}{}
	<-b.release
	return b.fakeReg.View()
}

// TestRendersBounded: 16 parallel loads of the status page took 690 MiB.
// At most MaxRenders views of the whole registry are built at once; one
// more is answered 503 with Retry-After at once, not queued.
func TestRendersBounded(t *testing.T) {
	reg := blockingReg{fakeReg: &fakeReg{}, entered: make(chan struct{}, 100), release: make(chan struct{})}
	h := Handler(Options{Registry: reg})
	var wg sync.WaitGroup
	for range MaxRenders {
		wg.Add(1)
		go func() { defer wg.Done(); getRec(h, "/") }()
	}
	for range MaxRenders {
		<-reg.entered
	}
	for _, p := range []string{"/", "/v1/servers", "/v1/duplicates"} {
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() { done <- getRec(h, p) }()
		select {
		case rec := <-done:
			if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
				t.Errorf("GET %s beyond %d renders: %d, Retry-After %q; want 503 with Retry-After", p, MaxRenders, rec.Code, rec.Header().Get("Retry-After"))
			}
		case <-time.After(10 * time.Second):
			t.Errorf("GET %s beyond %d renders waits for them; want 503 at once", p, MaxRenders)
		}
	}
	close(reg.release)
	wg.Wait()
	if rec := getRec(h, "/v1/servers"); rec.Code != 200 {
		t.Errorf("after the renders ended: %d", rec.Code)
	}
}

// /v1/names says when more names match than its limit let it answer.
func TestNamesSayWhenCut(t *testing.T) {
	reg := &fakeReg{names: []registry.NameInfo{{Name: "a:1", GUID: g1, Addr: a1}, {Name: "a:2", GUID: g1, Addr: a1}}}
	h := Handler(Options{Registry: reg})
	for limit, more := range map[int]string{1: "true", 2: "", 3: ""} {
		rec := getRec(h, fmt.Sprintf("/v1/names?match=a:*&limit=%d", limit))
		var rows []Name
		if err := json.Unmarshal(rec.Body.Bytes(), &rows); err != nil || len(rows) != min(limit, 2) || rec.Header().Get(MoreHeader) != more {
			t.Errorf("limit %d: %d rows, %s %q; want %d, %q", limit, len(rows), MoreHeader, rec.Header().Get(MoreHeader), min(limit, 2), more)
		}
	}
}
