package tls

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

// waitingClient searches names over TCP on the name server with protos;
// the answers come directly or by push (answersOf).
func waitingClient(t *testing.T, server netip.AddrPort, protos []string, names ...string) *nsclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := nsclient.Dial(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.Protocols = protos
	if err := c.Search(names); err != nil {
		t.Fatal(err)
	}
	return c
}

func answersOf(t *testing.T, c *nsclient.Client) map[string]nsclient.Answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	as, unresolved, err := c.Wait(ctx)
	if err != nil || len(unresolved) > 0 {
		t.Fatalf("answers %+v, unresolved %v, %v", as, unresolved, err)
	}
	out := map[string]nsclient.Answer{}
	for _, a := range as {
		out[a.Name] = a
	}
	return out
}

// TestSearchThroughTLS: a TLS server no probe can list (it refuses every
// channel, so its names reach pvans only through search-through), a TLS
// client and a plain client waiting on pvans for the same name. The
// search through lists the waiting client's protocols, so the TLS client
// is pushed "tls" and the server's TLS port, the plain one "tcp" and the
// plain port. On the old pvans the ring searched ["tcp"] only and the TLS
// client was pushed the plain endpoint.
func TestSearchThroughTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon; skipped with -short")
	}
	pki := testutil.NewPKI(t, "pvans e2e CA")
	site, err := sim.Start(context.Background(), sim.Options{Servers: 1, Names: [][]string{{"hid:pv1", "hid:pv2"}},
		UpdateInterval: -1, RefuseChannels: true, TLS: pki.ServerConfig(pki.Issue(t, "sim-ioc", testutil.CertOptions{}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	srv := site.Server(0)
	pv := harness.Start(t, harness.Options{Args: []string{"--discovery-at-start=false", "--search-through",
		"--addr-list", srv.UDP.String()}})

	secure := waitingClient(t, pv.TCP, []string{"tls", "tcp"}, "hid:pv1", "hid:pv2")
	plain := waitingClient(t, pv.TCP, nil, "hid:pv1")
	for name, a := range answersOf(t, secure) {
		if a.Protocol != "tls" || a.Endpoint != srv.TLS || a.GUID != srv.GUID {
			t.Errorf("TLS client pushed %s: %+v, want tls %v", name, a, srv.TLS)
		}
	}
	if a := answersOf(t, plain)["hid:pv1"]; a.Protocol != "tcp" || a.Endpoint != srv.TCP || a.GUID != srv.GUID {
		t.Errorf("plain client pushed %+v, want tcp %v", a, srv.TCP)
	}
}

// TestPushPerSearch: one connection searches a name plainly, then another
// name offering TLS, both waiting; when the server lists them, each is
// pushed as its own search is answered: "tcp" for the plain search, "tls"
// for the other. On the old pvans a connection that had once listed "tls"
// was pushed "tls" for every name, so the plain search got the TLS port.
func TestPushPerSearch(t *testing.T) {
	w := newWorld(t)
	c := waitingClient(t, w.pv.TCP, nil, "sec:plainlate")
	c.Protocols = []string{"tls", "tcp"}
	if err := c.Search([]string{"sec:tlslate"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.pv.WaitMetric("pvans_resolver_waiters", func(v float64) bool { return v >= 2 }, 10*time.Millisecond, 10*time.Second); !ok {
		t.Fatal("pvans never counted both waiters")
	}
	if err := w.site.SetNames(0, []string{"sec:pv1", "sec:pv2", "sec:plainlate", "sec:tlslate"}); err != nil {
		t.Fatal(err)
	}
	as := answersOf(t, c)
	if a := as["sec:plainlate"]; a.Protocol != "tcp" || a.Endpoint != w.srv.TCP {
		t.Errorf("plain search pushed %+v, want tcp %v", a, w.srv.TCP)
	}
	if a := as["sec:tlslate"]; a.Protocol != "tls" || a.Endpoint != w.srv.TLS {
		t.Errorf("TLS search pushed %+v, want tls %v", a, w.srv.TLS)
	}
}

// TestSearchThroughTLSPlainFirst is TestSearchThroughTLS with the order
// fixed the way it once went wrong by chance (issue 39, row 12): the
// server answers the plain search at once and the TLS search only later,
// so pvans hears the plain answer, checks it over TCP and registers the
// server from it — with no TLS endpoint — while the TLS client still
// waits. The registry's commit then pushed the TLS client the plaintext
// endpoint. The TLS client must be told nothing but the TLS endpoint,
// once pvans has heard it (over UDP when the server answers again, or
// from asking the unlistable server over TCP, offering "tls").
func TestSearchThroughTLSPlainFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon; skipped with -short")
	}
	pki := testutil.NewPKI(t, "pvans e2e CA")
	site, err := sim.Start(context.Background(), sim.Options{Servers: 1, Names: [][]string{{"hid:pv1"}},
		UpdateInterval: -1, RefuseChannels: true, TLS: pki.ServerConfig(pki.Issue(t, "sim-ioc", testutil.CertOptions{}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	srv := site.Server(0)
	if err := site.MuteTLSSearches(0, true); err != nil {
		t.Fatal(err)
	}
	pv := harness.Start(t, harness.Options{Args: []string{"--discovery-at-start=false", "--search-through",
		"--addr-list", srv.UDP.String()}})

	secure := waitingClient(t, pv.TCP, []string{"tls", "tcp"}, "hid:pv1")
	plain := waitingClient(t, pv.TCP, nil, "hid:pv1")
	if a := answersOf(t, plain)["hid:pv1"]; a.Protocol != "tcp" || a.Endpoint != srv.TCP {
		t.Fatalf("plain client pushed %+v, want tcp %v", a, srv.TCP)
	}
	testutil.WaitFor(t, 30*time.Second, "pvans registers the plain answer", func() bool {
		ok, _ := pv.HasName("hid:pv1")
		return ok
	})
	// The commit's push, if any, went out with the commit; give it time
	// to arrive. The only answer the TLS client may have by now is the
	// server's TLS endpoint, which pvans learns when it asks the
	// unlistable server directly, over TCP, offering "tls".
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	as, _, _ := secure.Wait(ctx)
	cancel()
	if len(as) > 0 && (as[0].Protocol != "tls" || as[0].Endpoint != srv.TLS) {
		t.Fatalf("TLS client pushed %+v before the server answered its TLS search over UDP", as[0])
	}
	if err := site.MuteTLSSearches(0, false); err != nil {
		t.Fatal(err)
	}
	if a := answersOf(t, secure)["hid:pv1"]; a.Protocol != "tls" || a.Endpoint != srv.TLS || a.GUID != srv.GUID {
		t.Errorf("TLS client pushed %+v, want tls %v", a, srv.TLS)
	}
}
