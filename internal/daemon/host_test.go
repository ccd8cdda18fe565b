package daemon

import (
	"net/http"
	"os"
	"testing"
)

// The running daemon's HTTP API answers this host's own name and refuses
// a rebound one (httpapi/host.go); http.allowed_hosts applies at a
// reload.
func TestHTTPHostCheckWired(t *testing.T) {
	c := testConfig(t)
	d := startDaemon(t, c)
	status := func(host string) int {
		req, _ := http.NewRequest("GET", "http://"+d.HTTPAddr()+"/v1/servers", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	own, err := os.Hostname()
	if err != nil {
		t.Skip("no host name:", err)
	}
	if got := status(own + ":9076"); got != 200 {
		t.Errorf("Host %s (this host): %d, want 200", own, got)
	}
	if got := status("pvans.site.example"); got != http.StatusMisdirectedRequest {
		t.Errorf("Host pvans.site.example before it is allowed: %d, want 421", got)
	}
	next := *c
	next.HTTP.AllowedHosts = []string{"pvans.site.example"}
	if applied, _ := d.Reload(&next); len(applied) != 1 || applied[0] != "http.allowed_hosts" {
		t.Fatalf("reload applied %v", applied)
	}
	if got := status("pvans.site.example"); got != 200 {
		t.Errorf("Host pvans.site.example after the reload allowed it: %d, want 200", got)
	}
}
