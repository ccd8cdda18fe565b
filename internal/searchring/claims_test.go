package searchring

import (
	"net/netip"
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
)

// Over TCP, a server that is not a name server may name only itself: its
// address "any" or its own, its port 0 or its own. A name server (or a
// trusted relay) may name any endpoint.
func TestTCPServerMayNameOnlyItself(t *testing.T) {
	var cb callbacks
	r, clk, rc := newTestRing(t, cb.options(Options{}))
	names := []string{"other:addr", "other:port", "any:zero", "own:both", "by:nameserver"}
	for _, n := range names {
		r.Want(n)
	}
	clk.Advance(InitialDelay)
	third := netip.MustParseAddr("127.0.0.99")
	reply := func(name string, a pva.Address, port uint16) *pva.SearchResponse {
		m := rc.claim(guid(1), "tcp", port, rc.cidOf(t, name))
		m.Addr = a
		return m
	}
	r.OnReply(tcpSrc, ViaServer, reply("other:addr", pva.AddressFrom(third), tcpSrc.Port()))
	r.OnReply(tcpSrc, ViaServer, reply("other:port", pva.AnyIPv4, 8888))
	r.OnReply(tcpSrc, ViaServer, reply("any:zero", pva.AnyIPv4, 0))
	r.OnReply(tcpSrc, ViaServer, reply("own:both", pva.AddressFrom(tcpSrc.Addr()), tcpSrc.Port()))
	r.OnReply(tcpSrc, ViaNameServer, reply("by:nameserver", pva.AddressFrom(third), 8888))
	got := map[string]netip.AddrPort{}
	for _, res := range cb.resolved() {
		got[res.name] = res.ep
	}
	want := map[string]netip.AddrPort{"any:zero": tcpSrc, "own:both": tcpSrc, "by:nameserver": netip.AddrPortFrom(third, 8888)}
	if len(got) != len(want) {
		t.Fatalf("resolved %v, want %v", got, want)
	}
	for n, ep := range want {
		if got[n] != ep {
			t.Errorf("%s resolved to %v, want %v", n, got[n], ep)
		}
	}
	if s := r.Stats(); r.ctr.thirdParty.Load() != 2 || s.Searching != 2 {
		t.Fatalf("stats %+v: want 2 third-party replies dropped and their names still searched", metrics.Sprint(&r.ctr))
	}
}

// A server is asked about a waiting name only when it claimed that name
// before (the ring resolved it there); the claims are bounded by
// MaxChannels, oldest forgotten first.
func TestSearchingAtOnlyClaimedNames(t *testing.T) {
	var cb callbacks
	r, clk, rc := newTestRing(t, cb.options(Options{MaxChannels: 3, SweepDelay: -1}))
	a := netip.MustParseAddrPort("127.0.0.5:5075")
	b := netip.MustParseAddrPort("127.0.0.6:5075")
	for _, n := range []string{"a:1", "a:2", "b:1"} {
		r.Want(n)
	}
	clk.Advance(InitialDelay)
	if _, names, _ := r.SearchingAt(a); len(names) != 0 {
		t.Fatalf("a never claimed anything, asked about %d names", len(names))
	}
	r.OnReply(a, ViaServer, rc.claim(guid(1), "tcp", 0, rc.cidOf(t, "a:1"), rc.cidOf(t, "a:2")))
	r.OnReply(b, ViaServer, rc.claim(guid(2), "tcp", 0, rc.cidOf(t, "b:1")))
	// Every name is wanted again (its server was lost): a is asked about
	// its own names only.
	if n := r.ReenterServer(guid(1), ReenterLost) + r.ReenterServer(guid(2), ReenterLost); n != 3 {
		t.Fatalf("re-entered %d", n)
	}
	seq, names, _ := r.SearchingAt(a)
	if len(names) != 2 || !askedAbout(names, "a:1", "a:2") {
		t.Fatalf("a asked about %d names, want a:1 and a:2", len(names))
	}
	// The answer to the ask is matched like any other.
	m := claim(guid(3), "tcp", 0, names[0].CID)
	m.Seq = seq
	r.OnReply(a, ViaServer, m)
	if r.ctr.resolved.Load() != 4 || r.ctr.unmatched.Load() != 0 {
		t.Fatalf("resolved %d, unmatched %d: the ask's answer was not matched", r.ctr.resolved.Load(), r.ctr.unmatched.Load())
	}
	// A fourth claim forgets the oldest (a:1).
	r.Drop("a:1")
	r.Want("b:2")
	clk.Advance(InitialDelay)
	r.OnReply(b, ViaServer, rc.claim(guid(2), "tcp", 0, rc.cidOf(t, "b:2")))
	if r.ctr.claimsForgotten.Load() != 1 {
		t.Fatalf("claims forgotten %d, want 1", r.ctr.claimsForgotten.Load())
	}
	r.ReenterServer(guid(3), ReenterLost)
	r.ReenterServer(guid(2), ReenterLost)
	if _, names, _ := r.SearchingAt(b); len(names) != 2 || !askedAbout(names, "b:1", "b:2") {
		t.Fatalf("b asked about %d names, want b:1 and b:2", len(names))
	}
}

// A TLS Channel is asked about apart from a plain one (issue 39, row 12):
// the caller asks it with TLSProtocols, as the ring searched it, since a
// "tcp" answer to it means "this server has no TLS".
func TestSearchingAtKeepsTLSApart(t *testing.T) {
	var cb callbacks
	r, clk, rc := newTestRing(t, cb.options(Options{SweepDelay: -1}))
	a := netip.MustParseAddrPort("127.0.0.5:5075")
	r.Want("x:1")
	r.WantTLS("x:1")
	r.WantTLS("x:2")
	clk.Advance(InitialDelay)
	r.OnReply(a, ViaServer, rc.claim(guid(1), "tcp", 0, rc.cidFor(t, "x:1", "tcp")))
	r.OnReply(a, ViaServer, rc.claim(guid(1), "tls", 0, rc.cidFor(t, "x:1", "tls", "tcp"), rc.cidFor(t, "x:2", "tls", "tcp")))
	if n := r.ReenterServer(guid(1), ReenterLost); n != 3 {
		t.Fatalf("re-entered %d, want 3", n)
	}
	_, names, namesTLS := r.SearchingAt(a)
	if !askedAbout(names, "x:1") || !askedAbout(namesTLS, "x:1", "x:2") {
		t.Fatalf("asked plainly about %d names, with TLS about %d", len(names), len(namesTLS))
	}
	if names[0].CID != rc.cidFor(t, "x:1", "tcp") {
		t.Fatalf("plain x:1 asked with CID %#x, the TLS Channel's", names[0].CID)
	}
}

func askedAbout(names []pva.SearchName, want ...string) bool {
	got := map[string]bool{}
	for _, n := range names {
		got[string(n.Name)] = true
	}
	for _, w := range want {
		if !got[w] {
			return false
		}
	}
	return len(got) == len(want)
}
