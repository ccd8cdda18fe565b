package ioc

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/daemon"
	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// demoSite is pvans (config.Loopback on free ports, probe echo every
// echo) and a simulated site beaconing to it, with every name listed.
type demoSite struct {
	d    *daemon.Daemon
	site *sim.Site
	ns   netip.AddrPort // pvans' TCP name-server endpoint
	echo time.Duration
}

func start(t *testing.T, servers, names int, echo time.Duration, o sim.Options) *demoSite {
	t.Helper()
	cfg := config.Loopback(testutil.FreeTCPPort(t), testutil.FreeUDPPort(t))
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Log.Level = "error"
	if echo > 0 {
		cfg.PVA.ConnTmo = 2 * echo.Seconds() // as pvans demo --echo: PVXS's echo is half of conn_tmo
	}
	echo = cfg.PVA.EchoInterval()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(&cfg, daemon.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	})
	o.Servers, o.NamesPerServer = servers, names
	o.BeaconDests = []netip.AddrPort{netip.AddrPortFrom(loopback, cfg.PVA.BroadcastPort)}
	site, err := sim.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	testutil.WaitFor(t, 30*time.Second, "every name listed", func() bool { return d.Registry.Counts().Names == servers*names })
	return &demoSite{d: d, site: site, ns: netip.AddrPortFrom(loopback, cfg.PVA.ServerPort), echo: echo}
}

// resolve asks pvans over TCP, as a PVXS client with
// EPICS_PVA_NAME_SERVERS does; ok is false when pvans has no answer
// within wait.
func (s *demoSite) resolve(t *testing.T, name string, wait time.Duration) (nsclient.Answer, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait+5*time.Second)
	defer cancel()
	c, err := nsclient.Dial(ctx, s.ns)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Search([]string{name}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, wait)
	defer wcancel()
	ans, _, err := c.Wait(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ans) == 0 {
		return nsclient.Answer{}, false
	}
	return ans[0], true
}

// open resolves name through pvans and connects to the server it names.
func (s *demoSite) open(t *testing.T, name string) *pvClient {
	t.Helper()
	a, ok := s.resolve(t, name, 5*time.Second)
	if !ok {
		t.Fatalf("pvans does not resolve %s", name)
	}
	if a.Endpoint == s.ns {
		t.Fatalf("pvans sent the client to itself for %s", name)
	}
	return connect(t, a.Endpoint, name)
}

func (s *demoSite) exec(t *testing.T, cmd string) string {
	t.Helper()
	out, err := s.site.Exec(cmd)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	t.Logf("%s → %s", cmd, out)
	return out
}

// --- channel operations, through pvans as the name server -----------------

func TestGetFieldThroughPvans(t *testing.T) {
	s := start(t, 2, 20, 0, sim.Options{})
	c := s.open(t, "sim:s1:pv7")
	typ := c.info()
	if typ.ID != pva.NTScalarID || typ.Index("value") != 0 || typ.Members[0].Type.Code != pva.TypeFloat64 ||
		typ.Index("alarm") < 0 || typ.Index("timeStamp") < 0 {
		t.Fatalf("pvxinfo type %+v", typ)
	}
}

func TestPutThenGetThroughPvans(t *testing.T) {
	// Values that do not count: the GET must return exactly what was put.
	s := start(t, 2, 20, 0, sim.Options{UpdateInterval: -1})
	c := s.open(t, "sim:s0:pv3")
	if v := c.get().Field("value").Float; v != 3 {
		t.Fatalf("before put: %v, want 3", v)
	}
	c.put(42.5)
	if v := c.get().Field("value").Float; v != 42.5 {
		t.Fatalf("after put: %v, want 42.5", v)
	}
	// Another client, resolved afresh, sees it too.
	if v := s.open(t, "sim:s0:pv3").get().Field("value").Float; v != 42.5 {
		t.Fatalf("second client reads %v", v)
	}
}

func TestMonitorThroughPvans(t *testing.T) {
	s := start(t, 1, 10, 0, sim.Options{UpdateInterval: 200 * time.Millisecond})
	c := s.open(t, "sim:s0:pv5")
	got := c.monitor(4)
	t.Logf("monitor values %v", got)
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("monitor values %v do not count up", got)
		}
	}
	// A put shows up in a monitor on another connection.
	m := s.open(t, "sim:s0:pv5")
	p := s.open(t, "sim:s0:pv5")
	done := make(chan []float64)
	go func() { done <- m.monitorUntil(func(v float64) bool { return v >= 1000 && v < 1010 }) }()
	time.Sleep(300 * time.Millisecond)
	p.put(1000)
	select {
	case vals := <-done:
		t.Logf("monitor saw the put: %v", vals)
	case <-time.After(10 * time.Second):
		t.Fatal("monitor did not see the put")
	}
}
