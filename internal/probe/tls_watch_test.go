package probe

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/keychain"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// dialLog records the prober's dials (endpoint, over TLS or not) and
// refuses TLS ones while blockTLS is set (a TLS port firewalled).
type dialLog struct {
	mu       sync.Mutex
	dials    []string
	blockTLS atomic.Bool
}

func (d *dialLog) dial(ctx context.Context, ep netip.AddrPort, o pvaconn.Options, h pvaconn.Handler) (*pvaconn.Conn, error) {
	kind := "tcp"
	if o.TLS != nil {
		kind = "tls"
	}
	d.mu.Lock()
	d.dials = append(d.dials, kind+" "+ep.String())
	d.mu.Unlock()
	if kind == "tls" && d.blockTLS.Load() {
		return nil, errors.New("TLS port blocked")
	}
	return pvaconn.Dial(ctx, ep, o, h)
}

func (d *dialLog) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.dials
	d.dials = nil
	return out
}

func watchTLS(p *Prober) bool {
	ss := p.Servers()
	return len(ss) == 1 && ss[0].Connected && ss[0].TLS
}

// TestListsAndWatchesOverTLS: with pvans's TLS configuration, a server
// whose listing proves its TLS endpoint is then watched over TLS, and
// re-listed there (the identity from that connection's certificate); a
// fresh connection after the watch is lost goes to the TLS endpoint
// first. On the old prober the TLS connection only proved the identity
// and was closed: the watch and every listing stayed on plain TCP.
func TestListsAndWatchesOverTLS(t *testing.T) {
	pki := testutil.NewPKI(t, "Site CA")
	cert := pki.Issue(t, "ioc", testutil.CertOptions{})
	srv := startServer(t, sim.Options{TLS: pki.ServerConfig(cert)}, "a:one")
	tlsEP := srv.site.Server(0).TLS
	var d dialLog
	k := newSink()
	c := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: c, Sink: k, TLS: pki.ClientConfig(nil), Dial: d.dial})
	p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
	r := k.next(t, "listed", 10*time.Second)
	if r.info.Identity != keychain.Identity(cert.Leaf) || r.info.TLS != tlsEP {
		t.Fatalf("first listing: identity %q, TLS %v (%s)", r.info.Identity, r.info.TLS, r.info.TLSErr)
	}
	if got := d.take(); !slices.Equal(got, []string{"tcp " + srv.Addr().String(), "tls " + tlsEP.String()}) {
		t.Fatalf("dials %v, want the plain endpoint then the TLS one", got)
	}
	testutil.WaitFor(t, 5*time.Second, "the watch to move to TLS", func() bool { return watchTLS(p) })
	if st := p.Stats(); st.WatchingTLS != 1 || p.stats.Lost.Load() != 0 {
		t.Fatalf("stats %+v: want one TLS watch and nothing lost", st)
	}

	// A re-listing runs on the TLS watch: no new connection.
	srv.SetNames([]string{"a:one", "a:two"})
	c.Advance(2 * time.Second) // past the hint hold-off
	p.Probe(srv.GUID(), srv.Addr(), ReasonChanged)
	r = k.next(t, "listed", 10*time.Second)
	if len(r.names) != 2 || r.info.Identity != keychain.Identity(cert.Leaf) || r.info.TLS != tlsEP {
		t.Fatalf("re-listing %+v", r)
	}
	if got := d.take(); len(got) != 0 {
		t.Fatalf("re-listing dialled %v", got)
	}

	// The watch lost: the next connection is made over TLS first.
	srv.CloseConns()
	k.next(t, "lost", 10*time.Second)
	c.Advance(10 * time.Second)
	r = k.next(t, "listed", 10*time.Second)
	if r.info.Identity != keychain.Identity(cert.Leaf) || len(r.names) != 2 {
		t.Fatalf("listing after the loss %+v", r)
	}
	if got := d.take(); !slices.Equal(got, []string{"tls " + tlsEP.String()}) {
		t.Fatalf("dials after the loss %v, want the TLS endpoint only", got)
	}
	if !watchTLS(p) {
		t.Fatalf("watch not over TLS: %+v", p.Servers())
	}
}

// TestTLSFallsBackToPlain: when the TLS endpoint cannot be reached, a
// server known to serve TLS is connected to, listed and watched over
// plain TCP as before (no identity, the reason kept), and counted.
func TestTLSFallsBackToPlain(t *testing.T) {
	pki := testutil.NewPKI(t, "Site CA")
	srv := startServer(t, sim.Options{TLS: pki.ServerConfig(pki.Issue(t, "ioc", testutil.CertOptions{}))}, "a:one")
	var d dialLog
	k := newSink()
	c := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: c, Sink: k, TLS: pki.ClientConfig(nil), Dial: d.dial})
	p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
	k.next(t, "listed", 10*time.Second)
	testutil.WaitFor(t, 5*time.Second, "the watch to move to TLS", func() bool { return watchTLS(p) })

	d.blockTLS.Store(true)
	srv.CloseConns()
	k.next(t, "lost", 10*time.Second)
	c.Advance(10 * time.Second)
	r := k.next(t, "listed", 10*time.Second)
	if r.info.Identity != "" || r.info.TLSErr == "" || len(r.names) != 1 {
		t.Fatalf("listing over plain TCP %+v", r)
	}
	ss := p.Servers()
	if len(ss) != 1 || !ss[0].Connected || ss[0].TLS {
		t.Fatalf("status %+v: want a plain watch", ss)
	}
	if st := p.Stats(); p.stats.TLSFallbacks.Load() != 1 || st.WatchingTLS != 0 {
		t.Fatalf("stats %+v", st)
	}
}
