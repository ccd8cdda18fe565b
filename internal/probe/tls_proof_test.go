package probe

import (
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/keychain"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// TestListingProvesTLSIdentity: with a TLS client configuration (pvans's
// keychain), a listing that learned a TLS endpoint connects there over
// TLS, checks that the same server (GUID) answers, and records the
// certificate's identity (subject and issuer); a certificate pvans's roots
// do not trust is not recorded, and the listing still stands.
func TestListingProvesTLSIdentity(t *testing.T) {
	site := testutil.NewPKI(t, "Site CA")
	other := testutil.NewPKI(t, "Other CA")
	good := site.Issue(t, "ioc-good", testutil.CertOptions{})
	stranger := other.Issue(t, "ioc-stranger", testutil.CertOptions{})
	for _, c := range []struct {
		name    string
		cert    *testutil.Cert
		pki     *testutil.PKI
		want    string
		wantErr string
	}{
		{"site certificate", good, site, keychain.Identity(good.Leaf), ""},
		{"untrusted certificate", stranger, other, "", "certificate signed by unknown authority"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := startServer(t, sim.Options{TLS: c.pki.ServerConfig(c.cert)}, "a:one")
			k := newSink()
			p := newProber(t, Options{Clock: clock.NewFake(time.Time{}), Sink: k, TLS: site.ClientConfig(nil)})
			p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
			r := k.next(t, "listed", 10*time.Second)
			if r.info.Identity != c.want || !strings.Contains(r.info.TLSErr, c.wantErr) || !r.info.TLS.IsValid() {
				t.Fatalf("identity %q (want %q), TLS error %q (want %q), TLS %v", r.info.Identity, c.want, r.info.TLSErr, c.wantErr, r.info.TLS)
			}
			if len(r.names) != 1 {
				t.Fatalf("names %v", r.names)
			}
		})
	}
	if id := keychain.Identity(good.Leaf); !strings.Contains(id, "CN=ioc-good") || !strings.Contains(id, "CN=Site CA") {
		t.Fatalf("identity %q names neither subject nor issuer", id)
	}
}
