package registry

import (
	"net/netip"
	"path/filepath"
	"testing"
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
