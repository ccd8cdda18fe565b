package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/registry"
)

// A server lost and not back stays visible as down for
// httpapi.DefaultShowDownFor: first in /v1/servers, on the status page and in
// its banner; then it is gone.
func TestLostServerShownDown(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	down := events.NewDown()
	dead := netip.MustParseAddrPort("127.0.0.9:5075")
	down.Lost(events.DownServer{GUID: "0a0b0c0d0e0f101112131415", Endpoint: dead, Since: clk.Now(), Reason: "no reply to echo", Names: 100})
	reg := &fakeReg{servers: []registry.ServerInfo{{GUID: g1, Addr: a1, Protocol: "tcp", ProbeState: registry.ProbeListed, Names: 2, Held: 2, Verified: true}}}
	srv := httptest.NewServer(Handler(Options{Registry: reg, Events: events.New(4), Down: down, Clock: clk,
		Limits: Limits{ShowDownFor: time.Hour}}))
	defer srv.Close()

	var ss []Server
	if err := json.Unmarshal([]byte(get(t, srv.URL+"/v1/servers", 200)), &ss); err != nil {
		t.Fatal(err)
	}
	if len(ss) != 2 || !ss[0].Down || ss[0].Endpoint != dead.String() || ss[0].LostReason != "no reply to echo" || ss[1].Down {
		t.Fatalf("/v1/servers = %+v, want the down server first, then the live one", ss)
	}
	page := get(t, srv.URL+"/", 200)
	for _, want := range []string{"degraded", "1 server down (127.0.0.9:5075)", "down since", "no reply to echo"} {
		if !strings.Contains(page, want) {
			t.Errorf("status page has no %q", want)
		}
	}
	if strings.Contains(page, "all 1 server up") {
		t.Error("the banner says every server is up while one is down")
	}

	clk.Advance(time.Hour)
	ss = nil
	if err := json.Unmarshal([]byte(get(t, srv.URL+"/v1/servers", 200)), &ss); err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 || ss[0].Down {
		t.Errorf("after httpapi.DefaultShowDownFor: %+v, want the live server only", ss)
	}
}
