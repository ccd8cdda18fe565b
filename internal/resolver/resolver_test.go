package resolver

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/addrmap"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

func guid(i int) pva.GUID {
	var g pva.GUID
	g[0], g[11] = 0xB0, byte(i)
	return g
}

func addr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 1, byte(i)}), 5075)
}

type fixture struct {
	reg *registry.Registry
	res *Resolver
	fc  *clock.Fake
}

func newFixture(t *testing.T, ro registry.Options, o Options) *fixture {
	fc := clock.NewFake(time.Time{})
	ro.Clock, o.Clock = fc, fc
	reg := registry.New(ro)
	res := New(reg, o)
	t.Cleanup(res.Close)
	for i := 1; i <= 3; i++ {
		if _, err := reg.UpsertServer(registry.ServerInfo{GUID: guid(i), Addr: addr(i)}); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{reg: reg, res: res, fc: fc}
}

func query(names ...string) []pva.SearchName {
	q := make([]pva.SearchName, len(names))
	for i, n := range names {
		q[i] = pva.SearchName{CID: 0x12345678 + uint32(i), Name: []byte(n)}
	}
	return q
}

// pushes records what a connection would have sent.
type pushes struct {
	mu sync.Mutex
	gs []Group
}

func (p *pushes) push(g Group) { p.mu.Lock(); p.gs = append(p.gs, g); p.mu.Unlock() }
func (p *pushes) take() []Group {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.gs
	p.gs = nil
	return g
}

type searcher struct{ want, drop []string }

func (s *searcher) Want(n string, _ bool) { s.want = append(s.want, n) }
func (s *searcher) Drop(n string, _ bool) { s.drop = append(s.drop, n) }

func TestLookupGroupsPerServer(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	f.reg.ReplaceNames(guid(1), []string{"a1", "a2", "a3"}, registry.SourceProbe)
	f.reg.ReplaceNames(guid(2), []string{"b1"}, registry.SourceProbe)
	q := query("a1", "nope", "b1", "a3", "zz", "a2")
	var b Batch
	f.res.Lookup(q, &b)
	if len(b.Groups) != 2 {
		t.Fatalf("groups %+v", b.Groups)
	}
	g0, g1 := b.Groups[0], b.Groups[1]
	if g0.Server != (Endpoint{GUID: guid(1), Addr: addr(1), Protocol: "tcp"}) ||
		!slices.Equal(g0.CIDs, []uint32{q[0].CID, q[3].CID, q[5].CID}) {
		t.Fatalf("group 0 %+v", g0)
	}
	if g1.Server.GUID != guid(2) || !slices.Equal(g1.CIDs, []uint32{q[2].CID}) {
		t.Fatalf("group 1 %+v", g1)
	}
	if !slices.Equal(b.Missing, []int{1, 4}) {
		t.Fatalf("missing %v", b.Missing)
	}
	// Reuse resets: a second lookup into the same batch carries nothing over.
	f.res.Lookup(query("b1"), &b)
	if len(b.Groups) != 1 || b.Groups[0].Server.GUID != guid(2) || len(b.Groups[0].CIDs) != 1 || len(b.Missing) != 0 {
		t.Fatalf("reused batch %+v", b)
	}
	allocs := testing.AllocsPerRun(100, func() { f.res.Lookup(q, &b) })
	if allocs != 0 {
		t.Fatalf("Lookup allocates %v per batch in steady state", allocs)
	}
	st := f.res.Stats()
	if f.res.st.names.Load() < 7 || f.res.st.misses.Load() < 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestWaitAndPush(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	s := &searcher{}
	f.res.SetSearcher(s)
	var p1, p2 pushes
	c1, c2 := f.res.NewClient(p1.push), f.res.NewClient(p2.push)
	// Both clients number their Channels from 0x12345678: same CIDs.
	q := query("x", "y", "known")
	f.reg.AddNames(guid(3), []string{"known"}, registry.SourceStatic)
	var b Batch
	f.res.Lookup(q, &b)
	c1.Wait(q, b.Missing, OfferTCP)
	c2.Wait(q[:1], []int{0}, OfferTCP)
	if !slices.Equal(s.want, []string{"x", "y"}) {
		t.Fatalf("one search per distinct name expected, Want %v", s.want)
	}
	if c1.Waiting() != 2 || c2.Waiting() != 1 {
		t.Fatalf("waiting %d %d", c1.Waiting(), c2.Waiting())
	}
	f.reg.ReplaceNames(guid(1), []string{"x", "other"}, registry.SourceProbe)
	g1, g2 := p1.take(), p2.take()
	want := Group{Server: Endpoint{GUID: guid(1), Addr: addr(1), Protocol: "tcp"}, CIDs: []uint32{q[0].CID}}
	if len(g1) != 1 || g1[0].Server != want.Server || !slices.Equal(g1[0].CIDs, want.CIDs) {
		t.Fatalf("client 1 pushes %+v", g1)
	}
	if len(g2) != 1 || !slices.Equal(g2[0].CIDs, want.CIDs) {
		t.Fatalf("client 2 pushes %+v", g2)
	}
	if !slices.Equal(s.drop, []string{"x"}) || c1.Waiting() != 1 || c2.Waiting() != 0 {
		t.Fatalf("after push: drop %v waiting %d %d", s.drop, c1.Waiting(), c2.Waiting())
	}
	// Nothing pushed twice.
	f.reg.AddNames(guid(2), []string{"x"}, registry.SourceSearchThrough)
	if g := p1.take(); len(g) != 0 {
		t.Fatalf("pushed again: %+v", g)
	}
	c1.Close()
	if !slices.Equal(s.drop, []string{"x", "y"}) || f.res.Stats().Waiting != 0 {
		t.Fatalf("close: drop %v stats %+v", s.drop, f.res.Stats())
	}
	f.reg.AddNames(guid(1), []string{"y"}, registry.SourceSearchThrough)
	if g := p1.take(); len(g) != 0 {
		t.Fatalf("push after Close: %+v", g)
	}
	if f.res.st.pushed.Load() != 2 {
		t.Fatalf("pushed %d, want 2", f.res.st.pushed.Load())
	}
}

func TestWaitForNameResolvedSinceLookup(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	var p pushes
	c := f.res.NewClient(p.push)
	q := query("late")
	var b Batch
	f.res.Lookup(q, &b)
	f.reg.AddNames(guid(2), []string{"late"}, registry.SourceSearchThrough) // no waiter yet
	c.Wait(q, b.Missing, OfferTCP)
	g := p.take()
	if len(g) != 1 || g[0].Server.GUID != guid(2) || c.Waiting() != 0 {
		t.Fatalf("pushes %+v, waiting %d", g, c.Waiting())
	}
}

func TestWaitExpiryAndRefresh(t *testing.T) {
	ttl := 60 * time.Second
	f := newFixture(t, registry.Options{}, Options{WaitTTL: ttl})
	s := &searcher{}
	f.res.SetSearcher(s)
	var p pushes
	c := f.res.NewClient(p.push)
	q := query("a", "b")
	c.Wait(q, []int{0, 1}, OfferTCP)
	f.fc.Advance(ttl / 2)
	c.Wait(q, []int{1}, OfferTCP) // the client retried "b" only
	f.fc.Advance(ttl/2 + ttl/4)
	if c.Waiting() != 1 || !slices.Equal(s.drop, []string{"a"}) {
		t.Fatalf("after first TTL: waiting %d drop %v", c.Waiting(), s.drop)
	}
	f.fc.Advance(ttl / 2)
	if c.Waiting() != 0 || !slices.Equal(s.drop, []string{"a", "b"}) || f.res.st.expired.Load() != 2 {
		t.Fatalf("after refresh TTL: waiting %d drop %v stats %+v", c.Waiting(), s.drop, f.res.Stats())
	}
	f.reg.AddNames(guid(1), []string{"b"}, registry.SourceStatic)
	if g := p.take(); len(g) != 0 {
		t.Fatalf("expired waiter pushed: %+v", g)
	}
}

func TestWaitBoundAndCIDReuse(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{MaxWaitsPerClient: 2})
	var p pushes
	c := f.res.NewClient(p.push)
	q := query("a", "b", "c")
	c.Wait(q, []int{0, 1, 2}, OfferTCP)
	if c.Waiting() != 2 || f.res.st.drops.Load() != 1 {
		t.Fatalf("bound: waiting %d stats %+v", c.Waiting(), f.res.Stats())
	}
	// The CID of "a" now means "z".
	c.Wait([]pva.SearchName{{CID: q[0].CID, Name: []byte("z")}}, []int{0}, OfferTCP)
	f.reg.AddNames(guid(1), []string{"a"}, registry.SourceStatic)
	if g := p.take(); len(g) != 0 {
		t.Fatalf("stale CID pushed: %+v", g)
	}
	f.reg.AddNames(guid(1), []string{"z"}, registry.SourceStatic)
	if g := p.take(); len(g) != 1 || !slices.Equal(g[0].CIDs, []uint32{q[0].CID}) {
		t.Fatalf("pushes %+v", g)
	}
}

func TestFieldNameWaiter(t *testing.T) {
	f := newFixture(t, registry.Options{FieldNames: true}, Options{})
	var p pushes
	c := f.res.NewClient(p.push)
	q := query("rec.VAL", "rec.HIHI", "rec")
	c.Wait(q, []int{0, 1, 2}, OfferTCP)
	f.reg.ReplaceNames(guid(2), []string{"rec"}, registry.SourceProbe)
	g := p.take()
	if len(g) != 1 || g[0].Server.GUID != guid(2) {
		t.Fatalf("pushes %+v", g)
	}
	got := slices.Sorted(slices.Values(g[0].CIDs))
	if !slices.Equal(got, []uint32{q[0].CID, q[1].CID, q[2].CID}) || c.Waiting() != 0 {
		t.Fatalf("CIDs %v waiting %d", got, c.Waiting())
	}
}

func TestPushOnTakeoverAfterHolderLeaves(t *testing.T) {
	// A name that vanished (holder gone, no claimant) is waited for again;
	// a later claim pushes it.
	f := newFixture(t, registry.Options{}, Options{})
	var p pushes
	c := f.res.NewClient(p.push)
	f.reg.AddNames(guid(1), []string{"n"}, registry.SourceStatic)
	f.reg.RemoveServer(guid(1))
	q := query("n")
	var b Batch
	f.res.Lookup(q, &b)
	if len(b.Missing) != 1 {
		t.Fatalf("removed server still answers: %+v", b)
	}
	c.Wait(q, b.Missing, OfferTCP)
	f.reg.AddNames(guid(3), []string{"n"}, registry.SourceStatic)
	if g := p.take(); len(g) != 1 || g[0].Server.GUID != guid(3) {
		t.Fatalf("pushes %+v", g)
	}
}

func TestConcurrentWaitAndCommit(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	const n = 200
	var p pushes
	c := f.res.NewClient(p.push)
	names := make([]string, n)
	for i := range names {
		names[i] = "c:" + string(rune('A'+i%26)) + string(rune('a'+i/26))
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		var b Batch
		for i, nm := range names {
			q := []pva.SearchName{{CID: uint32(i), Name: []byte(nm)}}
			f.res.Lookup(q, &b)
			if len(b.Missing) > 0 {
				c.Wait(q, b.Missing, OfferTCP)
			} else {
				p.push(b.Groups[0]) // answered directly
			}
		}
	}()
	go func() {
		defer wg.Done()
		for _, nm := range names {
			f.reg.AddNames(guid(1), []string{nm}, registry.SourceSearchThrough)
		}
	}()
	wg.Wait()
	if got := len(p.take()); got != n || c.Waiting() != 0 {
		t.Fatalf("answers %d of %d, still waiting %d", got, n, c.Waiting())
	}
}

func TestWireNeverLoopbackToRemoteClients(t *testing.T) {
	lo := Endpoint{Addr: netip.MustParseAddrPort("127.0.0.1:37445")}
	eth := Endpoint{Addr: netip.MustParseAddrPort("10.1.2.3:5075")}
	remote, local := netip.MustParseAddr("10.9.9.9"), netip.MustParseAddr("127.0.0.1")
	if a, p := lo.Wire(remote, nil); a != pva.AnyIPv4 || p != 37445 {
		t.Errorf("loopback server to remote client: %v:%d, want any:37445", a, p)
	}
	if a, p := lo.Wire(local, nil); a != pva.AddressFrom(local) || p != 37445 {
		t.Errorf("loopback server to local client: %v:%d", a, p)
	}
	for _, c := range []netip.Addr{remote, local, netip.MustParseAddr("::ffff:127.0.0.1")} {
		if a, p := eth.Wire(c, nil); a != pva.AddressFrom(netip.MustParseAddr("10.1.2.3")) || p != 5075 {
			t.Errorf("routable server (client %v): %v:%d", c, a, p)
		}
	}
}

// The address map comes first: a client outside the container network is
// told the published endpoint, one inside keeps the learned one, and a
// loopback result still follows the loopback rule.
func TestWireMapped(t *testing.T) {
	m, err := addrmap.ParseMap([]string{
		"servers=172.17.0.0/16 except_clients=172.17.0.0/16 to=10.0.0.5 ports=5075:15075",
		"servers=10.1.2.3:5075 to=127.0.0.1:9",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctr := Endpoint{Addr: netip.MustParseAddrPort("172.17.0.5:5075")}
	if a, p := ctr.Wire(netip.MustParseAddr("192.168.7.7"), m); a != pva.AddressFrom(netip.MustParseAddr("10.0.0.5")) || p != 15075 {
		t.Errorf("outside client told %v:%d", a, p)
	}
	if a, p := ctr.Wire(netip.MustParseAddr("172.17.0.9"), m); a != pva.AddressFrom(netip.MustParseAddr("172.17.0.5")) || p != 5075 {
		t.Errorf("inside client told %v:%d", a, p)
	}
	odd := Endpoint{Addr: netip.MustParseAddrPort("10.1.2.3:5075")}
	if a, p := odd.Wire(netip.MustParseAddr("192.168.7.7"), m); a != pva.AnyIPv4 || p != 9 {
		t.Errorf("mapped to loopback, remote client told %v:%d", a, p)
	}
}

// TestEndpointFor: the per-request choice of endpoint.
func TestEndpointFor(t *testing.T) {
	plain := netip.MustParseAddrPort("10.0.0.1:5075")
	sec := netip.MustParseAddrPort("10.0.0.1:5076")
	both := Endpoint{Addr: plain, Protocol: "tcp", TLSPort: sec.Port()}
	only := Endpoint{Addr: sec, Protocol: "tls"}
	none := Endpoint{Addr: plain, Protocol: "tcp"}
	for _, c := range []struct {
		e         Endpoint
		tls, ok   bool
		addr      netip.AddrPort
		wantProto string
	}{
		{both, true, true, sec, "tls"},
		{both, false, true, plain, "tcp"},
		{only, true, true, sec, "tls"},
		{only, false, false, sec, "tls"},
		{none, true, true, plain, "tcp"},
		{none, false, true, plain, "tcp"},
	} {
		got, ok := c.e.For(c.tls)
		if ok != c.ok || got.Addr != c.addr || got.Protocol != c.wantProto {
			t.Errorf("%+v.For(%v) = %+v, %v", c.e, c.tls, got, ok)
		}
	}
}
