package tls

import (
	"context"
	"crypto/tls"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/keychain"
	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

// peerCN is the subject CN of the certificate pvans's TLS listener shows.
func peerCN(t *testing.T, ep netip.AddrPort, cfg *tls.Config) string {
	t.Helper()
	c, err := tls.Dial("tcp", ep.String(), cfg)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestTLSListener: with a keychain pvans serves searches over TLS on its
// TLS port (a client names it pvas://host:port) exactly as over TCP: a
// TLS client is told the server's TLS endpoint, a plain search over the
// same connection the plain one. SIGHUP re-reads the keychain: a renewed
// certificate serves the next connection; a damaged file is refused and
// counted, and the keychain in force stays. The certificate's expiry is a
// metric.
func TestTLSListener(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon; skipped with -short")
	}
	dir := t.TempDir()
	pki := testutil.NewPKI(t, "pvans site CA")
	first := pki.Issue(t, "pvans-1", testutil.CertOptions{Both: true})
	kc := first.Keychain(t, dir, "pvans.p12", "pw")
	tlsPort := harness.FreePort(t)
	w := newWorldOpts(t, pki, "--tls-keychain", kc+";pw", "--tls-port", strconv.Itoa(int(tlsPort)))
	tlsEP := netip.AddrPortFrom(lo, tlsPort)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := nsclient.DialWith(ctx, tlsEP, nsclient.Options{TLS: pki.ClientConfig(nil)})
	if err != nil {
		t.Fatalf("pvas://%v: %v", tlsEP, err)
	}
	defer c.Close()
	c.Protocols = []string{"tls", "tcp"}
	if err := c.Search([]string{"sec:pv1"}); err != nil {
		t.Fatal(err)
	}
	as, unresolved, err := c.Wait(ctx)
	if err != nil || len(unresolved) > 0 || as[0].Protocol != "tls" || as[0].Endpoint != w.srv.TLS {
		t.Fatalf("over pvas://: %+v unresolved %v %v", as, unresolved, err)
	}
	// With a keychain, the listing proved the server's certificate.
	if _, id := w.serverTLSInfo(t); id != keychain.Identity(w.cert.Leaf) {
		t.Fatalf("tls_identity %q, want %q", id, keychain.Identity(w.cert.Leaf))
	}
	if exp := w.pv.Metric(t, "pvans_tls_certificate_expiry_timestamp_seconds"); exp != float64(first.Leaf.NotAfter.Unix()) {
		t.Fatalf("expiry metric %v, want %d", exp, first.Leaf.NotAfter.Unix())
	}
	if got := peerCN(t, tlsEP, pki.ClientConfig(nil)); got != "pvans-1" {
		t.Fatalf("certificate %q", got)
	}

	pki.Issue(t, "pvans-2", testutil.CertOptions{Both: true}).Keychain(t, dir, "pvans.p12", "pw")
	if err := w.pv.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "the renewed certificate served", func() bool {
		return peerCN(t, tlsEP, pki.ClientConfig(nil)) == "pvans-2"
	})

	if err := os.WriteFile(kc, []byte("damaged"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.pv.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.pv.WaitMetric("pvans_tls_keychain_reload_errors_total", func(v float64) bool { return v == 1 }, 20*time.Millisecond, 20*time.Second); !ok {
		t.Fatal("the damaged keychain was not counted as refused")
	}
	if got := peerCN(t, tlsEP, pki.ClientConfig(nil)); got != "pvans-2" {
		t.Fatalf("after a refused reload the certificate is %q", got)
	}
	if !strings.Contains(w.pv.Output(), "keychain not reloaded") {
		t.Fatal("the refused reload was not logged")
	}
}

// TestBadKeychainRefused: a keychain pvans cannot use refuses the start,
// and the output says why.
func TestBadKeychainRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon; skipped with -short")
	}
	dir := t.TempDir()
	pki := testutil.NewPKI(t, "pvans site CA")
	good := pki.Issue(t, "pvans", testutil.CertOptions{}).Keychain(t, dir, "good.p12", "pw")
	client := pki.Issue(t, "client", testutil.CertOptions{Client: true}).Keychain(t, dir, "client.p12", "")
	junk := filepath.Join(dir, "junk.p12")
	if err := os.WriteFile(junk, []byte("not a keychain"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"--tls-keychain", filepath.Join(dir, "nope.p12")}, "cannot read"},
		{"wrong password", []string{"--tls-keychain", good + ";wrong"}, "not a PKCS#12 file this password opens"},
		{"not PKCS#12", []string{"--tls-keychain", junk}, "not a PKCS#12 file"},
		{"client certificate", []string{"--tls-keychain", client}, "does not permit use as a TLS server"},
		{"bad option", []string{"--tls-keychain", good + ";pw", "--tls-options", "client_cert=maybe"}, "must be require or optional"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pv := harness.Start(t, harness.Options{NoWait: true,
				Args: append([]string{"--tls-port", strconv.Itoa(int(harness.FreePort(t)))}, c.args...)})
			select {
			case <-pv.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("pvans started with a bad keychain")
			}
			if pv.Cmd.ProcessState.ExitCode() == 0 || !strings.Contains(pv.Output(), c.want) {
				t.Fatalf("exit %d, output:\n%s\nwant a reason containing %q", pv.Cmd.ProcessState.ExitCode(), pv.Output(), c.want)
			}
		})
	}
}

// TestWatchedOverTLS: with a keychain, pvans watches a Secure PVAccess
// server over TLS once a listing has proven its TLS endpoint, and re-lists
// it there: a name the server adds is answered (with "tls" to a TLS
// client), the identity stays, and nothing fell back to plain TCP. On the
// old pvans the watch stayed on plain TCP (pvans_probe_tls_watches did
// not exist).
func TestWatchedOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon; skipped with -short")
	}
	dir := t.TempDir()
	pki := testutil.NewPKI(t, "pvans site CA")
	kc := pki.Issue(t, "pvans", testutil.CertOptions{Both: true}).Keychain(t, dir, "pvans.p12", "pw")
	w := newWorldOpts(t, pki, "--tls-keychain", kc+";pw", "--tls-port", strconv.Itoa(int(harness.FreePort(t))))
	if _, ok := w.pv.WaitMetric("pvans_probe_tls_watches", func(v float64) bool { return v == 1 }, 20*time.Millisecond, 20*time.Second); !ok {
		t.Fatal("the server is not watched over TLS")
	}
	if err := w.site.SetNames(0, []string{"sec:pv1", "sec:pv2", "sec:added"}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "the added name listed", func() bool {
		ok, _ := w.pv.HasName("sec:added")
		return ok
	})
	if a := query(t, w.pv.TCP, []string{"tls", "tcp"}, "sec:added")["sec:added"]; a.Protocol != "tls" || a.Endpoint != w.srv.TLS {
		t.Fatalf("TLS client told %+v, want tls %v", a, w.srv.TLS)
	}
	if _, id := w.serverTLSInfo(t); id != keychain.Identity(w.cert.Leaf) {
		t.Fatalf("tls_identity %q after the re-listing", id)
	}
	if v := w.pv.Metric(t, "pvans_probe_tls_fallbacks_total"); v != 0 {
		t.Fatalf("%v TLS fallbacks", v)
	}
}
