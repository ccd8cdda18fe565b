package tcpsearch

import (
	"crypto/tls"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/testutil"
)

// tlsGateWorld is a world with a TLS listener whose access list allows no
// address by itself, only the certificate account "operator".
func tlsGateWorld(t *testing.T, pki *testutil.PKI, o Options) (*world, netip.AddrPort) {
	t.Helper()
	o.TLSListen = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}
	o.TLS = pki.ServerConfig(pki.Issue(t, "pvans", testutil.CertOptions{}))
	o.ClientAllowed = func(netip.Addr) bool { return false }
	o.ClientCertAllowed = func(_ netip.Addr, account string) bool { return account == "operator" }
	w := newWorld(t, o)
	return w, w.srv.TLSAddrs()[0]
}

// served dials the TLS listener from src with cert (nil: none), sends
// nothing, and reports whether pvans sent any PVA byte (its greeting)
// before the connection ended: a refused client must get none.
func served(t *testing.T, pki *testutil.PKI, ep netip.AddrPort, src netip.Addr, cert *testutil.Cert) bool {
	t.Helper()
	d := &net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 5 * time.Second}
	tc, err := tls.DialWithDialer(d, "tcp", ep.String(), pki.ClientConfig(cert))
	if err != nil {
		return false // refused within the handshake
	}
	defer tc.Close()
	tc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	n, err := io.ReadFull(tc, b[:])
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("pvans neither greeted nor closed a TLS client in 10 s")
	}
	return n > 0
}

// TestTLSClientRefusedAtHandshake: issue 39 row 5. With x509: allow
// rules, a TLS client whose certificate the rules refuse is closed when
// its handshake completes, counted, and never sent a PVA byte: before, it
// was checked at its first application message, so one that sent none
// (or only ECHOs) held its connection slot until the idle timeout and was
// never counted.
func TestTLSClientRefusedAtHandshake(t *testing.T) {
	pki := testutil.NewPKI(t, "tcpsearch CA")
	w, ep := tlsGateWorld(t, pki, Options{})
	lo := netip.MustParseAddr("127.0.0.1")
	for _, cert := range []*testutil.Cert{nil, pki.Issue(t, "guest", testutil.CertOptions{Client: true})} {
		if served(t, pki, ep, lo, cert) {
			t.Fatalf("refused client (certificate %v) was greeted", cert != nil)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "both refusals counted", func() bool { return w.srv.cnt.certDenied.Load() == 2 })
	testutil.WaitFor(t, 10*time.Second, "refused connections gone", func() bool { return w.srv.cnt.active.Load() == 0 })
	if !served(t, pki, ep, lo, pki.Issue(t, "operator", testutil.CertOptions{Client: true})) {
		t.Fatal("the allowed certificate was not served")
	}
}

// TestTLSAccountIsFirstCN: issue 39 row 6. x509:NAME names PVXS's x509
// account: the first CN of the certificate's subject (ossl.cpp
// fill_credentials, X509_NAME_get_text_by_NID). Go's
// pkix.Name.CommonName is the last one, so "CN=guest, CN=operator" was
// admitted by x509:operator, while a PVXS server calls that client "guest".
func TestTLSAccountIsFirstCN(t *testing.T) {
	pki := testutil.NewPKI(t, "tcpsearch CA")
	w, ep := tlsGateWorld(t, pki, Options{})
	lo := netip.MustParseAddr("127.0.0.1")
	if served(t, pki, ep, lo, pki.Issue(t, "guest", testutil.CertOptions{Client: true, MoreCNs: []string{"operator"}})) {
		t.Fatal("CN=guest, CN=operator admitted by x509:operator")
	}
	if !served(t, pki, ep, lo, pki.Issue(t, "operator", testutil.CertOptions{Client: true, MoreCNs: []string{"guest"}})) {
		t.Fatal("CN=operator, CN=guest refused by x509:operator")
	}
	if d := w.srv.cnt.certDenied.Load(); d != 1 {
		t.Fatalf("certificate refusals %d, want 1", d)
	}
}

// TestTLSHandshakesPerSource: issue 39 row 9. A TLS handshake costs pvans
// milliseconds of CPU; one source may start TLSHandshakeBurst at once and
// TLSHandshakeRate a second after that. A connection beyond is closed
// before its handshake (counted); other sources are not affected, and
// the budget refills with time.
func TestTLSHandshakesPerSource(t *testing.T) {
	pki := testutil.NewPKI(t, "tcpsearch CA")
	clk := clock.NewFake(time.Now())
	w, ep := tlsGateWorld(t, pki, Options{Clock: clk})
	ok := pki.Issue(t, "operator", testutil.CertOptions{Client: true})
	a, b := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	for i := 0; i < TLSHandshakeBurst; i++ {
		if !served(t, pki, ep, a, ok) {
			t.Fatalf("handshake %d of the burst refused", i+1)
		}
	}
	if served(t, pki, ep, a, ok) {
		t.Fatal("a handshake beyond the burst was served")
	}
	if w.srv.cnt.handshakesLimited.Load() != 1 {
		t.Fatalf("handshakes refused %d, want 1", w.srv.cnt.handshakesLimited.Load())
	}
	if !served(t, pki, ep, b, ok) {
		t.Fatal("another source's handshake refused")
	}
	clk.Advance(time.Second)
	for i := 0; i < TLSHandshakeRate; i++ {
		if !served(t, pki, ep, a, ok) {
			t.Fatalf("handshake %d a second later refused", i+1)
		}
	}
	if served(t, pki, ep, a, ok) {
		t.Fatal("more than TLSHandshakeRate handshakes a second later")
	}
}
