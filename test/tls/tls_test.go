package tls

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

var lo = netip.MustParseAddr("127.0.0.1")

// world is pvans on loopback and one TLS-serving sim server beaconing to it.
type world struct {
	pv   *harness.Pvans
	site *sim.Site
	srv  sim.ServerInfo
	pki  *testutil.PKI
	cert *testutil.Cert // the sim server's
}

func newWorld(t *testing.T, args ...string) *world {
	t.Helper()
	return newWorldOpts(t, testutil.NewPKI(t, "pvans e2e CA"), args...)
}

// newWorldOpts is newWorld with the site's PKI and pvans flags.
func newWorldOpts(t *testing.T, pki *testutil.PKI, args ...string) *world {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the daemon; skipped with -short")
	}
	w := &world{pki: pki}
	cert := w.pki.Issue(t, "sim-ioc", testutil.CertOptions{})
	w.cert = cert
	w.pv = harness.Start(t, harness.Options{Args: append([]string{"--discovery-at-start=false"}, args...)})
	site, err := sim.Start(context.Background(), sim.Options{Servers: 1, Names: [][]string{{"sec:pv1", "sec:pv2"}},
		UpdateInterval: -1, BeaconDests: []netip.AddrPort{w.pv.UDP}, BeaconInterval: 200 * time.Millisecond,
		TLS: w.pki.ServerConfig(cert)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	w.site, w.srv = site, site.Server(0)
	testutil.WaitFor(t, 30*time.Second, "pvans lists the server", func() bool {
		ok, _ := w.pv.HasName("sec:pv1")
		return ok
	})
	return w
}

// serverTLS is the TLS endpoint /v1/servers shows for the sim server.
func (w *world) serverTLS(t *testing.T) string {
	t.Helper()
	ep, _ := w.serverTLSInfo(t)
	return ep
}

// serverTLSInfo is the TLS endpoint and identity /v1/servers shows for
// the sim server.
func (w *world) serverTLSInfo(t *testing.T) (endpoint, identity string) {
	t.Helper()
	code, b, err := w.pv.Get("/v1/servers")
	if err != nil || code != 200 {
		return "", ""
	}
	var out []struct {
		GUID     string `json:"guid"`
		TLS      string `json:"tls_endpoint"`
		Identity string `json:"tls_identity"`
	}
	if json.Unmarshal(b, &out) != nil {
		return "", ""
	}
	for _, s := range out {
		if s.GUID == w.srv.GUID.String() {
			return s.TLS, s.Identity
		}
	}
	return "", ""
}

func query(t *testing.T, server netip.AddrPort, protos []string, names ...string) map[string]nsclient.Answer {
	t.Helper()
	return answersOf(t, waitingClient(t, server, protos, names...))
}

// udpSearch sends one search datagram to pvans and returns the first
// answer.
func udpSearch(t *testing.T, to netip.AddrPort, protos []string, name string) pva.SearchResponse {
	t.Helper()
	uc, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	s := pva.Search{Seq: 77, Flags: pva.SearchUnicast, ReplyPort: uint16(uc.LocalAddr().(*net.UDPAddr).Port),
		Names: []pva.SearchName{{CID: 5, Name: []byte(name)}}}
	for _, p := range protos {
		s.Protocols = append(s.Protocols, []byte(p))
	}
	if _, err := uc.WriteToUDPAddrPort(pva.AppendSearch(nil, pva.FlagBigEndian, &s), to); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	_ = uc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		n, _, err := uc.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("no UDP answer for %s %v: %v", name, protos, err)
		}
		h, p, _, err := pva.SplitMessage(buf[:n])
		if err != nil || h.Command != pva.CmdSearchResponse {
			continue
		}
		var r pva.SearchResponse
		if r.Decode(p, h.BigEndian()) != nil || !r.Found {
			continue
		}
		r.Protocol = slices.Clone(r.Protocol)
		return r
	}
}

// TestNeverDowngraded: through pvans, a search offering ["tls","tcp"]
// over TCP, over UDP and as a push gets "tls" and the server's TLS port; a
// plain search gets "tcp" and the plain port. On the old pvans every
// answer was "tcp" and the plain port: it silently stripped TLS.
func TestNeverDowngraded(t *testing.T) {
	w := newWorld(t)
	secure := []string{"tls", "tcp"}

	a := query(t, w.pv.TCP, secure, "sec:pv1")["sec:pv1"]
	if a.Protocol != "tls" || a.Endpoint != w.srv.TLS || a.GUID != w.srv.GUID {
		t.Fatalf("TCP, TLS client: %+v, want tls %v", a, w.srv.TLS)
	}
	a = query(t, w.pv.TCP, nil, "sec:pv1")["sec:pv1"]
	if a.Protocol != "tcp" || a.Endpoint != w.srv.TCP {
		t.Fatalf("TCP, plain client: %+v, want tcp %v", a, w.srv.TCP)
	}

	r := udpSearch(t, w.pv.UDP, secure, "sec:pv2")
	if string(r.Protocol) != "tls" || r.Port != w.srv.TLS.Port() {
		t.Fatalf("UDP, TLS client: %+v, want tls port %d", r, w.srv.TLS.Port())
	}
	r = udpSearch(t, w.pv.UDP, []string{"tcp"}, "sec:pv2")
	if string(r.Protocol) != "tcp" || r.Port != w.srv.TCP.Port() {
		t.Fatalf("UDP, plain client: %+v, want tcp port %d", r, w.srv.TCP.Port())
	}

	// Push: the name appears after the search; the re-listing (the beacon's
	// change count moved) answers the waiting TLS client with "tls".
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := nsclient.Dial(ctx, w.pv.TCP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Protocols = secure
	if err := c.Search([]string{"sec:late"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.pv.WaitMetric("pvans_resolver_waiters", func(v float64) bool { return v >= 1 }, 10*time.Millisecond, 10*time.Second); !ok {
		t.Fatal("pvans never counted the waiter")
	}
	if err := w.site.SetNames(0, []string{"sec:pv1", "sec:pv2", "sec:late"}); err != nil {
		t.Fatal(err)
	}
	as, unresolved, err := c.Wait(ctx)
	if err != nil || len(unresolved) > 0 || len(as) != 1 {
		t.Fatalf("push: %+v unresolved %v %v", as, unresolved, err)
	}
	if as[0].Protocol != "tls" || as[0].Endpoint != w.srv.TLS {
		t.Fatalf("pushed to TLS client: %+v, want tls %v", as[0], w.srv.TLS)
	}
	if got := w.serverTLS(t); got != w.srv.TLS.String() {
		t.Fatalf("/v1/servers tls_endpoint %q, want %v", got, w.srv.TLS)
	}
}
