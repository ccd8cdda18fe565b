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
		{"no TCP search answers", sim.Options{TLS: pki.ServerConfig(cert), NoTCPSearch: true}, false},
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

// TestPingProvesTLSServerGUID: PVXS's tls branch answers a TCP search only
// when it lists "tcp" (or "tls" before it); one with no protocol gets no
// reply, not even to MustReply. The probe's TCP discovery ping lists
// "tcp", so a Secure PVAccess server's GUID is proven over TCP like any
// other (a static one is reported under its own GUID, not a synthetic
// one; a restart claim can be confirmed while the old watch is up).
func TestPingProvesTLSServerGUID(t *testing.T) {
	pki := testutil.NewPKI(t, "probe test CA")
	srv := startServer(t, sim.Options{TLS: pki.ServerConfig(pki.Issue(t, "ioc", testutil.CertOptions{}))}, "a:one")
	k := newSink()
	p := newProber(t, Options{Clock: clock.NewFake(time.Time{}), Sink: k, PingWait: 2 * time.Second})
	p.SetStatic([]netip.AddrPort{srv.Addr()})
	if r := k.next(t, "listed", 5*time.Second); r.guid != srv.GUID() {
		t.Fatalf("static TLS server listed as %v, want its own GUID %v (TCP discovery ping)", r.guid, srv.GUID())
	}
}
