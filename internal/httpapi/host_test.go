package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// request is one request to h with Host host; it returns the status.
func request(h http.Handler, method, target, host string) int {
	req := httptest.NewRequest(method, target, strings.NewReader("{}"))
	req.Host = host
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin") // what the rebound page's browser sends
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// TestDNSRebindingRefused is issue 39 row 8: a page from
// rebind.attacker.example that re-pointed its name at pvans's address is
// same-origin to the browser; every endpoint that reveals or changes state
// refuses its Host, and answers the names pvans is known by.
func TestDNSRebindingRefused(t *testing.T) {
	rounds := 0
	reg := &fakeReg{}
	h := Handler(Options{Registry: reg, Discover: func() error { rounds++; return nil },
		Limits: Limits{DiscoverInterval: time.Nanosecond}})
	const evil = "rebind.attacker.example:9076"
	for _, c := range []struct{ method, target string }{
		{"GET", "/v1/names"}, {"GET", "/v1/servers"}, {"GET", "/v1/duplicates"}, {"GET", "/v1/events"},
		{"GET", "/v1/changes"}, {"GET", "/v1/names/x"}, {"POST", "/v1/discover"}, {"GET", "/"}, {"GET", "/?name=x"},
	} {
		if code := request(h, c.method, c.target, evil); code != http.StatusMisdirectedRequest {
			t.Errorf("%s %s with Host %s: %d, want 421", c.method, c.target, evil, code)
		}
	}
	if rounds != 0 {
		t.Errorf("%d discovery rounds sent for the rebound page", rounds)
	}
	for _, host := range []string{"127.0.0.1:9076", "127.0.0.1", "[::1]:9076", "localhost:9076", "LocalHost.:9076",
		"pvans.localhost", "10.1.2.3:9076", "[fe80::1%25eth0]:9076", ""} {
		if code := request(h, "GET", "/v1/servers", host); code != http.StatusOK {
			t.Errorf("GET /v1/servers with Host %q: %d, want 200", host, code)
		}
	}
	if code := request(h, "POST", "/v1/discover", "localhost:9076"); code != http.StatusAccepted || rounds != 1 {
		t.Errorf("POST /v1/discover from localhost: %d, %d rounds", code, rounds)
	}
	// Probes and Prometheus reach these by whatever name they hold.
	for _, p := range []string{"/healthz", "/readyz"} {
		if code := request(h, "GET", p, evil); code != http.StatusOK {
			t.Errorf("GET %s with Host %s: %d, want 200 (exempt)", p, evil, code)
		}
	}
}

// The machine's own names and http.allowed_hosts are answered; a reload
// (Apply) changes the list.
func TestHostNamesAllowed(t *testing.T) {
	s := New(Options{Registry: &fakeReg{}, HostNames: []string{"gw01"},
		Limits: Limits{AllowedHosts: []string{"pvans.site.org", ".ctrl.site.org"}}})
	h := s.srv.Handler
	for host, want := range map[string]int{
		"gw01:9076": 200, "GW01.": 200, "pvans.site.org": 200, "PVANS.site.org.:9076": 200,
		"ctrl.site.org": 200, "a.b.ctrl.site.org": 200, "evilctrl.site.org": 421, "site.org": 421,
		"gw01.attacker.example": 421, "127.0.0.1.nip.io": 421,
	} {
		if code := request(h, "GET", "/v1/servers", host); code != want {
			t.Errorf("Host %q: %d, want %d", host, code, want)
		}
	}
	if s.cnt.hostRefused.Load() != 4 {
		t.Errorf("%d refusals counted, want 4", s.cnt.hostRefused.Load())
	}
	s.Apply(Limits{AllowedHosts: []string{"*"}})
	if code := request(h, "GET", "/v1/servers", "anything.example"); code != 200 {
		t.Errorf("with http.allowed_hosts *: %d, want 200", code)
	}
}
