package probe

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// TestListingLearnsTLSEndpoint: a listing also asks the server, over the
// same TCP connection, a search offering ["tls","tcp"]; a Secure PVAccess
// server's "tls" answer gives its TLS endpoint (Info.TLS), at the
// endpoint's own address; a plain server's "tcp" answer gives none, and
// so does a server that does not answer searches over TCP.
func TestListingLearnsTLSEndpoint(t *testing.T) {
	pki := testutil.NewPKI(t, "probe test CA")
	cert := pki.Issue(t, "ioc", testutil.CertOptions{})
	for _, c := range []struct {
		name string
		opt  sim.Options
		tls  bool
	}{
		{"tls server", sim.Options{TLS: pki.ServerConfig(cert)}, true},
		{"plain server", sim.Options{}, false},
		{"no TCP search answers", sim.Options{TLS: pki.ServerConfig(cert), NoPing: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := startServer(t, c.opt, "a:one")
			k := newSink()
			p := newProber(t, Options{Clock: clock.NewFake(time.Time{}), Sink: k})
			p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
			r := k.next(t, "listed", 5*time.Second)
			var want netip.AddrPort
			if c.tls {
				want = srv.site.Server(0).TLS
				if !want.IsValid() {
					t.Fatal("sim has no TLS endpoint")
				}
			}
			if r.info.TLS != want {
				t.Fatalf("TLS endpoint %v, want %v", r.info.TLS, want)
			}
		})
	}
}
