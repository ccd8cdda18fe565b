package registry

import (
	"errors"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/pvans-project/pvans/internal/pva"
)

// TestListedKeepsTLSEndpoint: a listing records the server's TLS endpoint
// next to its plain one, in its row, its Holder (what the hot path
// answers from) and the name list; a hint (a beacon) leaves it alone; a
// later listing that learned none clears it; a snapshot keeps it.
func TestListedKeepsTLSEndpoint(t *testing.T) {
	r, _ := newTest(t, Options{})
	tlsEP := netip.AddrPortFrom(addr(1).Addr(), 5086)
	if _, err := r.Listed(ServerInfo{GUID: guid(1), Addr: addr(1), TLS: tlsEP}, []string{"a", "b"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	check := func(want netip.AddrPort) {
		t.Helper()
		if h, ok := r.LookupName("a"); !ok || h.TLSPort != want.Port() || h.Addr != addr(1) {
			t.Fatalf("holder %+v, want TLS %v", h, want)
		}
		if s, ok := r.Server(guid(1)); !ok || s.TLS != want {
			t.Fatalf("server %+v, want TLS %v", s, want)
		}
		if ns := listNames(r, "b", 0); len(ns) != 1 || ns[0].TLS != want {
			t.Fatalf("names %+v, want TLS %v", ns, want)
		}
	}
	check(tlsEP)
	if _, err := r.UpsertServer(ServerInfo{GUID: guid(1), Addr: addr(1), Discovered: SourceBeacon}); err != nil {
		t.Fatal(err)
	}
	check(tlsEP)

	path := filepath.Join(t.TempDir(), "tls.snap")
	if err := r.SaveSnapshot(path); err != nil {
		t.Fatal(err)
	}
	r2, _ := newTest(t, Options{})
	if err := r2.LoadSnapshot(path); err != nil {
		t.Fatal(err)
	}
	if h, ok := r2.LookupName("a"); !ok || h.TLSPort != tlsEP.Port() {
		t.Fatalf("after snapshot: %+v", h)
	}

	if _, err := r.Listed(ServerInfo{GUID: guid(1), Addr: addr(1)}, []string{"a", "b"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	check(netip.AddrPort{})
}

// TestSnapshotV2Loads loads testdata/registry-v2.snap (format 2, the
// first with TLS endpoints): the server with a TLS endpoint keeps it, the
// one without has none, and the duplicate claim is back.
func TestSnapshotV2Loads(t *testing.T) {
	r, _ := newTest(t, Options{})
	if err := r.LoadSnapshot(filepath.Join("testdata", "registry-v2.snap")); err != nil {
		t.Fatal(err)
	}
	s1, ok1 := r.Server(guid(1))
	s2, ok2 := r.Server(guid(2))
	if !ok1 || !ok2 || s1.TLS != netip.MustParseAddrPort("127.0.0.1:5076") || s2.TLS.IsValid() {
		t.Fatalf("servers %+v %+v", s1, s2)
	}
	if h, ok := r.LookupName("sec:a"); !ok || h.GUID != guid(1) || h.TLSPort != 5076 {
		t.Fatalf("sec:a held by %+v", h)
	}
	if v := r.View(); len(v.Duplicates) != 1 || v.Duplicates[0].Claimant != guid(2) {
		t.Fatalf("duplicates %+v", v.Duplicates)
	}
}

// TestListedTLSElsewhereDropped: a TLS endpoint at another address than
// the server's is not kept (a server names only its TLS port).
func TestListedTLSElsewhereDropped(t *testing.T) {
	r, _ := newTest(t, Options{})
	if _, err := r.Listed(ServerInfo{GUID: guid(1), Addr: addr(1), TLS: netip.MustParseAddrPort("192.0.2.7:5076")}, []string{"a"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	if s, _ := r.Server(guid(1)); s.TLS.IsValid() {
		t.Fatalf("TLS endpoint %v kept", s.TLS)
	}
}

// TestTLSProvenNameNotTakenByPlaintext: the servers at an endpoint whose
// server proved a certificate over TLS are replaced only by a listing that
// proves the same identity; a plaintext listing (or another identity) at
// that endpoint is refused and the names keep answering with the proven
// server, until its watch ends (RemoveServer). Duplicates show identities.
func TestTLSProvenNameNotTakenByPlaintext(t *testing.T) {
	r, _ := newTest(t, Options{})
	ep := addr(1)
	const id = "subject:CN=ioc issuer:CN=Site CA"
	if _, err := r.Listed(ServerInfo{GUID: guid(1), Addr: ep, TLS: netip.AddrPortFrom(ep.Addr(), 5076), Identity: id}, []string{"sec:a"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	holder := func() pva.GUID {
		t.Helper()
		g, _ := holderOf(t, r, "sec:a")
		return g
	}
	for _, claimant := range []ServerInfo{
		{GUID: guid(2), Addr: ep},
		{GUID: guid(3), Addr: ep, Identity: "subject:CN=evil issuer:CN=Site CA"},
	} {
		if _, err := r.Listed(claimant, []string{"sec:a"}, SourceProbe); !errors.Is(err, ErrIdentity) {
			t.Fatalf("listing %+v: %v, want ErrIdentity", claimant, err)
		}
		if g := holder(); g != guid(1) {
			t.Fatalf("sec:a moved to %v", g)
		}
	}
	if r.st.identityRefused.Load() != 2 {
		t.Fatalf("refused %d", r.st.identityRefused.Load())
	}
	// Elsewhere, a plaintext claim is only a duplicate, shown with identities.
	if _, err := r.Listed(ServerInfo{GUID: guid(4), Addr: addr(4)}, []string{"sec:a"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	if d := r.View().Duplicates; len(d) != 1 || d[0].HolderIdentity != id || d[0].ClaimantIdentity != "" {
		t.Fatalf("duplicates %+v", d)
	}
	// The same identity may replace it (a restart with a new GUID).
	if replaced, err := r.Listed(ServerInfo{GUID: guid(5), Addr: ep, Identity: id}, []string{"sec:a"}, SourceProbe); err != nil || len(replaced) != 1 || holder() != guid(5) {
		t.Fatalf("same identity: replaced %v, %v, holder %v", replaced, err, holder())
	}
	// Its watch ends: then the endpoint is free for anyone.
	if err := r.RemoveServer(guid(5)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Listed(ServerInfo{GUID: guid(6), Addr: ep}, []string{"sec:a"}, SourceProbe); err != nil {
		t.Fatalf("after the watch ended: %v", err)
	}
}

// TestSnapshotV3Loads loads testdata/registry-v3.snap (format 3, the
// first with TLS identities): the server proven over TLS comes back with
// its identity, so the trust rule holds across a restart of pvans (a
// plaintext listing at its endpoint is refused until the loaded server is
// dropped), the other without one; a snapshot of it keeps the identity.
func TestSnapshotV3Loads(t *testing.T) {
	const id = "subject:CN=ioc1 issuer:CN=Site CA"
	check := func(r *Registry) {
		t.Helper()
		s1, ok1 := r.Server(guid(1))
		s2, ok2 := r.Server(guid(2))
		if !ok1 || !ok2 || s1.Identity != id || s1.TLS != netip.MustParseAddrPort("127.0.0.1:5076") || s2.Identity != "" || s2.TLS.IsValid() {
			t.Fatalf("servers %+v %+v", s1, s2)
		}
		if v := r.View(); len(v.Duplicates) != 1 || v.Duplicates[0].HolderIdentity != id {
			t.Fatalf("duplicates %+v", v.Duplicates)
		}
	}
	r, _ := newTest(t, Options{})
	if err := r.LoadSnapshot(filepath.Join("testdata", "registry-v3.snap")); err != nil {
		t.Fatal(err)
	}
	check(r)
	path := filepath.Join(t.TempDir(), "again.snap")
	if err := r.SaveSnapshot(path); err != nil {
		t.Fatal(err)
	}
	r2, _ := newTest(t, Options{})
	if err := r2.LoadSnapshot(path); err != nil {
		t.Fatal(err)
	}
	check(r2)
	if _, err := r.Listed(ServerInfo{GUID: guid(9), Addr: addr(1)}, []string{"sec:a"}, SourceProbe); !errors.Is(err, ErrIdentity) {
		t.Fatalf("plaintext listing at the loaded TLS-proven endpoint: %v, want ErrIdentity", err)
	}
}
