package searchring

import (
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/pvans-project/pvans/internal/pva"
)

// cidFor finds the CID the ring used for name in datagrams listing protos.
func (rc *recorder) cidFor(t testing.TB, name string, protos ...string) uint32 {
	t.Helper()
	for _, d := range rc.datagrams() {
		if !slices.Equal(d.protos, protos) {
			continue
		}
		if i := slices.Index(d.names, name); i >= 0 {
			return d.cids[i]
		}
	}
	t.Fatalf("%q never searched with %v", name, protos)
	return 0
}

type tlsResolution struct {
	name    string
	ep      netip.AddrPort
	overTLS bool
}

// TestWantTLS: a name wanted by a TLS client is searched with
// ["tls","tcp"] in a Channel of its own, next to the plain one; a "tls"
// reply answers only the TLS Channel (to ResolvedTLS), never the plain
// one; a "tcp" reply to the TLS Channel is reported as plain. On the old
// ring every search listed ["tcp"] only.
func TestWantTLS(t *testing.T) {
	var cb callbacks
	var mu sync.Mutex
	var tlsRes []tlsResolution
	o := cb.options(Options{})
	o.ResolvedTLS = func(name string, _ pva.GUID, ep netip.AddrPort, overTLS bool) {
		mu.Lock()
		defer mu.Unlock()
		tlsRes = append(tlsRes, tlsResolution{name, ep, overTLS})
	}
	r, clk, rc := newTestRing(t, o)
	r.Want("A")
	r.WantTLS("A")
	r.WantTLS("B")
	clk.Advance(InitialDelay)
	plainA := rc.cidFor(t, "A", "tcp")
	tlsA := rc.cidFor(t, "A", "tls", "tcp")
	tlsB := rc.cidFor(t, "B", "tls", "tcp")
	if plainA == tlsA {
		t.Fatal("one CID for both Channels of A")
	}
	if st := r.Stats(); st.Channels != 3 || st.Searching != 3 {
		t.Fatalf("stats %+v, want 3 Channels searching", st)
	}

	// A TLS server answers the plain CID with "tls" (as if the search had
	// asked for it): not for a plain client.
	r.OnReply(udpSrc, ViaUDP, rc.claim(guid(1), "tls", 5086, plainA))
	if got := cb.resolved(); len(got) != 0 {
		t.Fatalf("tls reply resolved a plain Channel: %+v", got)
	}
	r.OnReply(udpSrc, ViaUDP, rc.claim(guid(1), "tls", 5086, tlsA))
	r.OnReply(udpSrc, ViaUDP, rc.claim(guid(2), "tcp", 5075, tlsB))
	r.OnReply(udpSrc, ViaUDP, rc.claim(guid(1), "tcp", 5085, plainA))
	mu.Lock()
	got := slices.Clone(tlsRes)
	mu.Unlock()
	want := []tlsResolution{
		{"A", netip.AddrPortFrom(udpSrc.Addr(), 5086), true},
		{"B", netip.AddrPortFrom(udpSrc.Addr(), 5075), false},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ResolvedTLS %+v, want %+v", got, want)
	}
	if p := cb.resolved(); len(p) != 1 || p[0].name != "A" || p[0].ep.Port() != 5085 {
		t.Fatalf("Resolved %+v, want A at 5085", p)
	}

	// Dropping one kind keeps the other searching.
	r.Want("C")
	r.WantTLS("C")
	r.DropTLS("C")
	clk.Advance(DefaultSweepDelay)
	rc.reset()
	if !searchedAfter(clk, rc, "C", secs(3)) {
		t.Fatal("plain C not searched after its TLS Channel was dropped")
	}
	for _, d := range rc.datagrams() {
		if slices.Contains(d.names, "C") && !slices.Equal(d.protos, []string{"tcp"}) {
			t.Fatalf("dropped TLS Channel of C still searched: %+v", d)
		}
	}
}
