package tcpsearch

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/addrmap"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/testutil"
)

var (
	guidT  = pva.GUID{0x7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	epT    = netip.MustParseAddrPort("10.1.2.9:5075")
	epTTLS = netip.MustParseAddrPort("10.1.2.9:5076")
)

// listedTLS registers a server the way a listing that learned its TLS
// endpoint does.
func (w *world) listedTLS(t *testing.T, g pva.GUID, ep, tlsEP netip.AddrPort, names ...string) {
	t.Helper()
	if _, err := w.reg.Listed(registry.ServerInfo{GUID: g, Addr: ep, TLS: tlsEP}, names, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
}

// searchProtos is search with a protocol list.
func (cl *client) searchProtos(seq uint32, protos []string, names ...string) {
	s := pva.Search{Seq: seq, Flags: pva.SearchUnicast}
	for _, p := range protos {
		s.Protocols = append(s.Protocols, []byte(p))
	}
	for i, n := range names {
		s.Names = append(s.Names, pva.SearchName{CID: uint32(100 + i), Name: []byte(n)})
	}
	cl.c.Send(pva.AppendSearch(nil, pva.FlagBigEndian, &s))
}

// TestTLSNeverDowngraded: a client that offers "tls" is named a server's
// TLS endpoint with protocol "tls", directly and when pushed; a plain
// client on the same listener gets the plain endpoint and "tcp"; servers
// without a TLS endpoint answer as before. map.rules apply to the TLS
// endpoint as to the plain one.
func TestTLSNeverDowngraded(t *testing.T) {
	m, err := addrmap.ParseMap([]string{"servers=10.1.2.9 to=192.0.2.9 ports=5075:15075,5076:15076"})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, Options{AddressMap: m})
	w.listedTLS(t, guidT, epT, epTTLS, "sec:pv")

	secure := dial(t, w.ep)
	secure.searchProtos(1, []string{"tls", "tcp"}, "sec:pv", "cap:a:mbox1")
	got := map[pva.GUID]response{}
	for range 2 {
		r := secure.next(t, 5*time.Second)
		got[r.m.GUID] = r
	}
	if r := got[guidT].m; string(r.Protocol) != "tls" || r.Port != 15076 || r.Addr.Addr() != netip.MustParseAddr("192.0.2.9") {
		t.Fatalf("TLS client, TLS server: %+v", r)
	}
	if r := got[guidA].m; string(r.Protocol) != "tcp" || r.Port != epA.Port() {
		t.Fatalf("TLS client, plain server: %+v", r)
	}

	plain := dial(t, w.ep)
	plain.searchProtos(2, []string{"tcp"}, "sec:pv")
	if r := plain.next(t, 5*time.Second).m; string(r.Protocol) != "tcp" || r.Port != 15075 || r.GUID != guidT {
		t.Fatalf("plain client: %+v", r)
	}

	// Pushed: the answer arrives after the search, chosen the same way.
	secure.searchProtos(3, []string{"tls", "tcp"}, "late:sec")
	plain.searchProtos(4, []string{"tcp"}, "late:sec")
	testutil.WaitFor(t, 20*time.Second, "two waiters", func() bool { return w.res.Stats().Waiting == 2 })
	if _, err := w.reg.Listed(registry.ServerInfo{GUID: guidT, Addr: epT, TLS: epTTLS}, []string{"sec:pv", "late:sec"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	if r := secure.next(t, 5*time.Second).m; string(r.Protocol) != "tls" || r.Port != 15076 {
		t.Fatalf("pushed to TLS client: %+v", r)
	}
	if r := plain.next(t, 5*time.Second).m; string(r.Protocol) != "tcp" || r.Port != 15075 {
		t.Fatalf("pushed to plain client: %+v", r)
	}
}

// TestTLSListenerResolves: on the TLS listener (pvas://) a client
// searches exactly as over TCP and is answered, TLS endpoints included; a
// plaintext PVA client on the TLS port is not served.
func TestTLSListenerResolves(t *testing.T) {
	pki := testutil.NewPKI(t, "tcpsearch CA")
	cert := pki.Issue(t, "pvans", testutil.CertOptions{})
	w := newWorld(t, Options{TLSListen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}, TLS: pki.ServerConfig(cert)})
	w.listedTLS(t, guidT, epT, epTTLS, "sec:pv")
	tep := w.srv.TLSAddrs()
	if len(tep) != 1 || tep[0].Port() == w.ep.Port() {
		t.Fatalf("TLS addrs %v (plain %v)", tep, w.ep)
	}
	cl := &client{resps: make(chan response, 16), other: make(chan pva.Header, 16)}
	c, err := pvaconn.Dial(context.Background(), tep[0], pvaconn.Options{TLS: pki.ClientConfig(nil)}, cl)
	if err != nil {
		t.Fatal(err)
	}
	cl.c = c
	t.Cleanup(func() { c.Close(); <-c.Done() })
	cl.searchProtos(1, []string{"tls", "tcp"}, "sec:pv")
	if r := cl.next(t, 5*time.Second).m; r.GUID != guidT || string(r.Protocol) != "tls" || r.Port != epTTLS.Port() {
		t.Fatalf("over TLS: %+v", r)
	}
	cl.searchProtos(2, []string{"tcp"}, "cap:a:mbox1")
	if r := cl.next(t, 5*time.Second).m; r.GUID != guidA || string(r.Protocol) != "tcp" {
		t.Fatalf("plain search over TLS: %+v", r)
	}
	if w.srv.cnt.tlsAccepted.Load() != 1 {
		t.Errorf("TLS accepted %d", w.srv.cnt.tlsAccepted.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if c, err := pvaconn.Dial(ctx, tep[0], pvaconn.Options{HandshakeTimeout: 2 * time.Second}, &client{}); err == nil {
		c.Close()
		t.Fatal("a plaintext client was served on the TLS port")
	}
}

// TestTLSClientAccessByCertificate: with ClientCertAllowed a TLS client is
// admitted by its verified certificate's account whatever its address;
// one without an admitted certificate fails the TLS handshake and is
// counted, never answered; plain clients keep the address rule.
func TestTLSClientAccessByCertificate(t *testing.T) {
	pki := testutil.NewPKI(t, "tcpsearch CA")
	srvCert := pki.Issue(t, "pvans", testutil.CertOptions{})
	w := newWorld(t, Options{TLSListen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}, TLS: pki.ServerConfig(srvCert),
		ClientAllowed:     func(netip.Addr) bool { return false }, // no address is allowed by itself
		ClientCertAllowed: func(_ netip.Addr, cn string) bool { return cn == "ops-console" }})
	tep := w.srv.TLSAddrs()[0]
	dialTLS := func(cert *testutil.Cert) *client {
		cl := &client{resps: make(chan response, 16), other: make(chan pva.Header, 16)}
		cfg := pki.ClientConfig(cert)
		c, err := pvaconn.Dial(context.Background(), tep, pvaconn.Options{TLS: cfg}, cl)
		if err != nil {
			t.Fatal(err)
		}
		cl.c = c
		t.Cleanup(func() { c.Close(); <-c.Done() })
		return cl
	}
	ok := dialTLS(pki.Issue(t, "ops-console", testutil.CertOptions{Client: true}))
	ok.searchProtos(1, []string{"tls", "tcp"}, "cap:a:mbox1")
	if r := ok.next(t, 5*time.Second).m; r.GUID != guidA {
		t.Fatalf("admitted client: %+v", r)
	}
	for _, cert := range []*testutil.Cert{nil, pki.Issue(t, "someone", testutil.CertOptions{Client: true})} {
		// Refused when the TLS handshake completes: the PVA one never
		// starts.
		if c, err := pvaconn.Dial(context.Background(), tep, pvaconn.Options{TLS: pki.ClientConfig(cert), HandshakeTimeout: 5 * time.Second}, &client{}); err == nil {
			c.Close()
			t.Fatal("refused client got through the handshakes")
		}
	}
	if w.srv.cnt.certDenied.Load() != 2 {
		t.Fatalf("certificate refusals %d", w.srv.cnt.certDenied.Load())
	}
	// The plain listener keeps the address rule: refused at accept.
	if c, err := pvaconn.Dial(context.Background(), w.ep, pvaconn.Options{HandshakeTimeout: 3 * time.Second}, &client{}); err == nil {
		c.Close()
		t.Fatal("a plain client was served though no address is allowed")
	}
}
