package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// api.md: every non-2xx answer under /v1 has the body {"error": why},
// misses included; the status page and /metrics keep the mux's answers.
func TestV1MissesAreJSON(t *testing.T) {
	srv, _, _ := newTestAPI()
	defer srv.Close()
	for _, c := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{"GET", "/v1/nosuch", 404, ""},
		{"GET", "/v1/servers/x/y", 404, ""},
		{"DELETE", "/v1/names", 405, "GET, HEAD"},
		{"GET", "/v1/discover", 405, "POST"},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e Error
		if resp.StatusCode != c.code || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
			json.Unmarshal(body, &e) != nil || e.Error == "" {
			t.Errorf("%s %s: %d %q %q, want %d with a JSON error", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, c.code)
		}
		if got := resp.Header.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
	}
	resp, err := http.Get(srv.URL + "/nosuch")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET /nosuch: %d, want 404", resp.StatusCode)
	}
}
