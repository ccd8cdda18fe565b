package tls

import (
	"crypto/tls"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

// greeted dials pvans's TLS listener with cert (nil: none), sends
// nothing, and reports whether pvans sent a PVA byte before closing.
func greeted(t *testing.T, ep netip.AddrPort, cfg *tls.Config) bool {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", ep.String(), cfg)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var b [1]byte
	n, err := io.ReadFull(c, b[:])
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("pvans neither greeted nor closed a TLS client in 20 s")
	}
	return n > 0
}

// TestTLSClientAccess (issue 39 rows 5, 6, 9, on the daemon): with
// access.tcp_client_allow "x509:operator", clients without a certificate
// or whose account (first CN) is not "operator" are closed when their
// handshake completes, counted, never greeted — they used to stay open
// until their first search, uncounted, holding slots. "CN=guest,
// CN=operator" is "guest", as PVXS calls it. A burst of connections from
// one source beyond its handshake budget is closed before the handshake.
func TestTLSClientAccess(t *testing.T) {
	dir := t.TempDir()
	pki := testutil.NewPKI(t, "pvans site CA")
	kc := pki.Issue(t, "pvans", testutil.CertOptions{Both: true}).Keychain(t, dir, "pvans.p12", "pw")
	tlsPort := harness.FreePort(t)
	w := newWorldOpts(t, pki, "--tls-keychain", kc+";pw", "--tls-port", strconv.Itoa(int(tlsPort)),
		"--access-tcp-client-allow", "x509:operator")
	ep := netip.AddrPortFrom(lo, tlsPort)

	refused := []*testutil.Cert{nil, pki.Issue(t, "guest", testutil.CertOptions{Client: true, MoreCNs: []string{"operator"}})}
	for i := 0; i < 20; i++ {
		if greeted(t, ep, pki.ClientConfig(refused[i%2])) {
			t.Fatalf("refused client %d greeted", i)
		}
	}
	if _, ok := w.pv.WaitMetric(`pvans_access_denied_total{what="tls_client"}`, func(v float64) bool { return v >= 20 }, 50*time.Millisecond, 20*time.Second); !ok {
		t.Fatalf("denials counted %v, want 20", w.pv.Metric(t, `pvans_access_denied_total{what="tls_client"}`))
	}
	if _, ok := w.pv.WaitMetric("pvans_tcp_connections", func(v float64) bool { return v == 0 }, 50*time.Millisecond, 20*time.Second); !ok {
		t.Fatalf("%v refused connections still open", w.pv.Metric(t, "pvans_tcp_connections"))
	}
	if !greeted(t, ep, pki.ClientConfig(pki.Issue(t, "operator", testutil.CertOptions{Client: true}))) {
		t.Fatal("the allowed client was not served")
	}

	// 200 connections at once from one source: at most the burst and what
	// refills meanwhile reach a handshake.
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c, err := net.DialTimeout("tcp", ep.String(), 10*time.Second); err == nil {
				c.Close()
			}
		}()
	}
	wg.Wait()
	series := `pvans_tcp_limit_hits_total{limit="tls_handshakes_per_source"}`
	if _, ok := w.pv.WaitMetric(series, func(v float64) bool { return v >= 100 }, 50*time.Millisecond, 20*time.Second); !ok {
		t.Fatalf("handshakes refused %v of 200 at once, want at least 100", w.pv.Metric(t, series))
	}
}
