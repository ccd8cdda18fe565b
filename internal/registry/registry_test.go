package registry

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
)

// tb is what the helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
}

func guid(i int) pva.GUID {
	var g pva.GUID
	g[0] = 0xA0
	g[8], g[9], g[10], g[11] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
	return g
}

func addr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, byte(i >> 8), byte(i)}), 5075)
}

func newTest(t tb, o Options) (*Registry, *clock.Fake) {
	fc := clock.NewFake(time.Time{})
	o.Clock = fc
	return New(o), fc
}

func mustUpsert(t tb, r *Registry, i int) {
	t.Helper()
	if _, err := r.UpsertServer(ServerInfo{GUID: guid(i), Addr: addr(i), Discovered: SourceBeacon}); err != nil {
		t.Fatal(err)
	}
}

func holderOf(t tb, r *Registry, name string) (pva.GUID, bool) {
	t.Helper()
	h, ok := r.LookupName(name)
	if !ok {
		return pva.GUID{}, false
	}
	return h.GUID, true
}

// listNames is NamesContext without a deadline.
func listNames(r *Registry, pattern string, limit int) []NameInfo {
	out, err := r.NamesContext(context.Background(), pattern, limit)
	if err != nil {
		panic(err)
	}
	return out
}

// claimsOf returns the names g claims (held or duplicate), sorted.
func claimsOf(r *Registry, g pva.GUID) ([]string, bool) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	row := serverBy(r.db.Txn(false), "id", g)
	if row == nil {
		return nil, false
	}
	return slices.Sorted(slices.Values(row.srv.names)), true
}

// slotOf returns g's slot.
func slotOf(t tb, r *Registry, g pva.GUID) uint32 {
	t.Helper()
	row := serverBy(r.db.Txn(false), "id", g)
	if row == nil {
		t.Fatal("no server", g)
	}
	return row.Slot
}

func TestUpsertServer(t *testing.T) {
	r, fc := newTest(t, Options{})
	created, err := r.UpsertServer(ServerInfo{GUID: guid(1), Addr: addr(1), Discovered: SourceBeacon, ChangeCount: 3, Version: 2})
	if err != nil || !created {
		t.Fatalf("created=%v err=%v", created, err)
	}
	first := fc.Now()
	fc.Advance(time.Second)
	created, err = r.UpsertServer(ServerInfo{GUID: guid(1), Addr: addr(1), Discovered: SourceDiscovery, ChangeCount: 4})
	if err != nil || created {
		t.Fatalf("second upsert: created=%v err=%v", created, err)
	}
	s, ok := r.Server(guid(1))
	if !ok {
		t.Fatal("server missing")
	}
	if s.Discovered != SourceBeacon || !s.FirstSeen.Equal(first) || !s.LastSeen.Equal(fc.Now()) ||
		s.ChangeCount != 4 || s.Protocol != "tcp" || !s.Verified {
		t.Fatalf("merged row wrong: %+v", s)
	}
	if err := r.SetProbeState(guid(1), ProbeFailed, errors.New("refused")); err != nil {
		t.Fatal(err)
	}
	s, _ = r.Server(guid(1))
	if s.ProbeState != ProbeFailed || s.ProbeError != "refused" {
		t.Fatalf("probe state: %+v", s)
	}
	if err := r.SetProbeState(guid(9), ProbeListed, nil); !errors.Is(err, ErrUnknownServer) {
		t.Fatalf("unknown server: %v", err)
	}
	mustUpsert(t, r, 2)
	if got := len(r.Servers()); got != 2 {
		t.Fatalf("Servers() = %d", got)
	}
	if err := r.RemoveServer(guid(1)); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Server(guid(1)); ok {
		t.Fatal("removed server still listed")
	}
	if err := r.RemoveServer(guid(1)); !errors.Is(err, ErrUnknownServer) {
		t.Fatalf("second remove: %v", err)
	}
}

// A hint (UpsertServer: a beacon, discovery or search-through reply) with a
// new GUID at a held endpoint changes nothing: the old server keeps its
// names and no row is made for the claimant (the trust rule).
func TestHintNeverReplacesServer(t *testing.T) {
	r, _ := newTest(t, Options{})
	mustUpsert(t, r, 1)
	if err := r.ReplaceNames(guid(1), []string{"a", "b"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	if _, err := r.UpsertServer(ServerInfo{GUID: guid(7), Addr: addr(1)}); !errors.Is(err, ErrEndpointHeld) {
		t.Fatalf("hint at a held endpoint: %v", err)
	}
	if _, ok := r.Server(guid(7)); ok {
		t.Fatal("claimant registered from a hint")
	}
	if g, ok := holderOf(t, r, "a"); !ok || g != guid(1) {
		t.Fatalf("a held by %v after a hint", g)
	}
	if r.st.replaced.Load() != 0 || r.st.hintsRefused.Load() != 1 {
		t.Fatalf("stats: %+v", metrics.Sprint(&r.st))
	}
}

// A hint naming a known GUID at another endpoint does not move the server.
func TestHintNeverMovesServer(t *testing.T) {
	r, _ := newTest(t, Options{})
	mustUpsert(t, r, 1)
	r.ReplaceNames(guid(1), []string{"a"}, SourceProbe)
	if _, err := r.UpsertServer(ServerInfo{GUID: guid(1), Addr: addr(50)}); !errors.Is(err, ErrEndpointHeld) {
		t.Fatalf("moving hint: %v", err)
	}
	if h, _ := r.LookupName("a"); h.Addr != addr(1) {
		t.Fatalf("a now at %v", h.Addr)
	}
}

// A TCP listing of a new GUID at a held endpoint replaces the old server:
// names both list keep answering throughout and stay with the new server
// even when a third server claims them as duplicates; names only the old
// one listed pass to their duplicate claimant or go.
func TestListedReplacesAtEndpoint(t *testing.T) {
	r, _ := newTest(t, Options{})
	mustUpsert(t, r, 1)
	mustUpsert(t, r, 2)
	r.ReplaceNames(guid(1), []string{"a", "b", "c"}, SourceProbe)
	r.ReplaceNames(guid(2), []string{"a", "b"}, SourceProbe) // duplicates
	mustUpsert(t, r, 7)                                      // elsewhere first
	if _, err := r.Listed(ServerInfo{GUID: guid(7), Addr: addr(1)}, []string{"a"}, SourceProbe); !errors.Is(err, ErrGUIDElsewhere) {
		t.Fatalf("GUID registered elsewhere: %v", err)
	}
	r.RemoveServer(guid(7))
	var seen, handed []string
	r.Subscribe(func(a []string) { seen = append(seen, a...) })
	r.SubscribeHandedOver(func(a []string) { handed = append(handed, a...) })
	replaced, err := r.Listed(ServerInfo{GUID: guid(7), Addr: addr(1), Discovered: SourceBeacon}, []string{"a", "c", "d"}, SourceProbe)
	if err != nil || len(replaced) != 1 || replaced[0] != guid(1) {
		t.Fatalf("replaced %v err %v", replaced, err)
	}
	for n, want := range map[string]pva.GUID{"a": guid(7), "b": guid(2), "c": guid(7), "d": guid(7)} {
		if g, _ := holderOf(t, r, n); g != want {
			t.Errorf("%s held by %v, want %v", n, g, want)
		}
	}
	if _, ok := r.Server(guid(1)); ok {
		t.Fatal("old server kept")
	}
	c := r.Counts()
	if c.Servers != 2 || c.Names != 4 || c.Claims != 5 || c.Duplicates != 1 {
		t.Fatalf("counts %+v", c)
	}
	if d := r.View().Duplicates; len(d) != 1 || d[0].Name != "a" || d[0].Holder != guid(7) || d[0].Claimant != guid(2) {
		t.Fatalf("duplicates %+v", d)
	}
	slices.Sort(seen)
	if !slices.Equal(seen, []string{"b", "d"}) {
		t.Fatalf("notified %v", seen)
	}
	slices.Sort(handed)
	if !slices.Equal(handed, []string{"a", "c"}) {
		t.Fatalf("handed over %v, want the names passed in place (a, c)", handed)
	}
	if r.st.replaced.Load() != 1 || r.st.takeovers.Load() != 1 {
		t.Fatalf("stats %+v", metrics.Sprint(&r.st))
	}
}

// A new server that already claimed a name as a duplicate of the old one
// at its endpoint (here: both rows at one endpoint, as a snapshot can
// hold) becomes its holder in place.
func TestListedHandsOverOwnDuplicate(t *testing.T) {
	r, _ := newTest(t, Options{})
	if _, err := r.Listed(ServerInfo{GUID: guid(1), Addr: addr(1)}, []string{"a", "b"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	r.UpsertServer(ServerInfo{GUID: guid(2), Addr: addr(1), Discovered: SourceStatic})
	r.ReplaceNames(guid(2), []string{"a"}, SourceProbe)
	if c := r.Counts(); c.Claims != 3 || c.Duplicates != 1 {
		t.Fatalf("setup counts %+v", c)
	}
	if _, err := r.Listed(ServerInfo{GUID: guid(2), Addr: addr(1)}, []string{"a"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	if g, _ := holderOf(t, r, "a"); g != guid(2) {
		t.Fatalf("a held by %v", g)
	}
	if _, ok := r.LookupName("b"); ok {
		t.Fatal("b kept")
	}
	if c := r.Counts(); c.Servers != 1 || c.Claims != 1 || c.Duplicates != 0 || c.Names != 1 {
		t.Fatalf("counts %+v", c)
	}
}

// A static name file's server is a claim of its own: a real server at the
// same endpoint neither is refused by it nor removes it.
func TestStaticFileServerCoexists(t *testing.T) {
	r, _ := newTest(t, Options{})
	static := pva.GUID{0x5A}
	if _, err := r.UpsertServer(ServerInfo{GUID: static, Addr: addr(1), Discovered: SourceStatic}); err != nil {
		t.Fatal(err)
	}
	r.ReplaceNames(static, []string{"file:a"}, SourceStatic)
	if _, err := r.UpsertServer(ServerInfo{GUID: guid(1), Addr: addr(1), Discovered: SourceBeacon}); err != nil {
		t.Fatalf("beacon at a static file's endpoint: %v", err)
	}
	if _, err := r.Listed(ServerInfo{GUID: guid(1), Addr: addr(1)}, []string{"b"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	if g, ok := holderOf(t, r, "file:a"); !ok || g != static {
		t.Fatalf("file:a held by %v", g)
	}
	if r.Counts().Servers != 2 {
		t.Fatal("static file server removed")
	}
}

func TestReplaceNames(t *testing.T) {
	r, fc := newTest(t, Options{})
	mustUpsert(t, r, 1)
	var notified [][]string
	r.Subscribe(func(a []string) { notified = append(notified, slices.Clone(a)) })
	if err := r.ReplaceNames(guid(1), []string{"x:a", "x:b", "x:b", "", "y:c"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	at1 := fc.Now()
	fc.Advance(time.Minute)
	if err := r.ReplaceNames(guid(1), []string{"x:b", "y:c", "z:d"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"x:a": false, "x:b": true, "y:c": true, "z:d": true} {
		if _, ok := r.LookupName(name); ok != want {
			t.Errorf("%s: found=%v want %v", name, ok, want)
		}
	}
	got, _ := claimsOf(r, guid(1))
	if !slices.Equal(got, []string{"x:b", "y:c", "z:d"}) {
		t.Fatalf("claims = %v", got)
	}
	if len(notified) != 2 || !slices.Equal(notified[0], []string{"x:a", "x:b", "y:c"}) || !slices.Equal(notified[1], []string{"z:d"}) {
		t.Fatalf("notifications %v", notified)
	}
	s, _ := r.Server(guid(1))
	if s.Names != 3 || s.Held != 3 || s.ListedHow != SourceProbe || !s.ListedAt.Equal(fc.Now()) {
		t.Fatalf("row %+v (first listing at %v)", s, at1)
	}
	c := r.Counts()
	if c.Names != 3 || c.Claims != 3 || c.Servers != 1 {
		t.Fatalf("counts %+v", c)
	}
	if err := r.ReplaceNames(guid(2), []string{"q"}, SourceProbe); !errors.Is(err, ErrUnknownServer) {
		t.Fatalf("unknown server: %v", err)
	}
}

func TestAddNameAndNames(t *testing.T) {
	r, fc := newTest(t, Options{})
	mustUpsert(t, r, 1)
	mustUpsert(t, r, 2)
	r.ReplaceNames(guid(1), []string{"SR:C1:BPM1", "SR:C1:BPM2", "SR:C2:BPM1"}, SourceProbe)
	listed := fc.Now()
	fc.Advance(time.Second)
	if err := r.AddNames(guid(2), []string{"LN:GUN:V"}, SourceSearchThrough); err != nil {
		t.Fatal(err)
	}
	if err := r.AddNames(guid(2), []string{"LN:GUN:V"}, SourceSearchThrough); err != nil { // idempotent
		t.Fatal(err)
	}
	if c := r.Counts(); c.Claims != 4 {
		t.Fatalf("claims after repeated AddNames: %+v", c)
	}
	if err := r.AddNames(guid(3), []string{"z"}, SourceStatic); !errors.Is(err, ErrUnknownServer) {
		t.Fatalf("unknown: %v", err)
	}
	names := func(p string, lim int) []string {
		var out []string
		for _, n := range listNames(r, p, lim) {
			out = append(out, n.Name)
		}
		return out
	}
	if got := names("SR:C1:", 0); !slices.Equal(got, []string{"SR:C1:BPM1", "SR:C1:BPM2"}) {
		t.Errorf("prefix: %v", got)
	}
	if got := names("SR:*:BPM1", 0); !slices.Equal(got, []string{"SR:C1:BPM1", "SR:C2:BPM1"}) {
		t.Errorf("glob: %v", got)
	}
	if got := names("*BPM?", 1); !slices.Equal(got, []string{"SR:C1:BPM1"}) {
		t.Errorf("limit: %v", got)
	}
	if got := names("", 0); len(got) != 4 {
		t.Errorf("all: %v", got)
	}
	all := listNames(r, "", 0)
	if all[0].Name != "LN:GUN:V" || all[0].How != SourceSearchThrough || !all[0].At.Equal(fc.Now()) || all[0].GUID != guid(2) {
		t.Errorf("search-through name info %+v", all[0])
	}
	if all[1].How != SourceProbe || !all[1].At.Equal(listed) || all[1].Addr != addr(1) {
		t.Errorf("probe name info %+v", all[1])
	}
}

// A reader must see a server's names all from before or all from after a
// replace, never part of each.
func TestConcurrentReadersDuringReplace(t *testing.T) {
	r, _ := newTest(t, Options{})
	mustUpsert(t, r, 1)
	const n = 300
	setA, setB := make([]string, n), make([]string, n)
	var q []pva.SearchName
	for i := range n {
		setA[i], setB[i] = fmt.Sprintf("A:%d", i), fmt.Sprintf("B:%d", i)
	}
	for i := range n {
		q = append(q, pva.SearchName{CID: uint32(i), Name: []byte(setA[i])}, pva.SearchName{CID: uint32(n + i), Name: []byte(setB[i])})
	}
	r.ReplaceNames(guid(1), setA, SourceProbe)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	errs := make(chan string, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]*Holder, len(q))
			for !stop.Load() {
				r.LookupBatch(q, out)
				a, b := 0, 0
				for i, h := range out {
					if h != nil && i%2 == 0 {
						a++
					} else if h != nil {
						b++
					}
				}
				if !(a == n && b == 0 || a == 0 && b == n) {
					select {
					case errs <- fmt.Sprintf("torn read: %d of A, %d of B", a, b):
					default:
					}
					return
				}
				reads.Add(1)
			}
		}()
	}
	for i := 0; i < 200 || reads.Load() < 50; i++ {
		set := setB
		if i%2 == 1 {
			set = setA
		}
		if err := r.ReplaceNames(guid(1), set, SourceProbe); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	select {
	case e := <-errs:
		t.Fatal(e)
	default:
	}
}

func TestDuplicatesAndTakeover(t *testing.T) {
	r, _ := newTest(t, Options{})
	for i := 1; i <= 3; i++ {
		mustUpsert(t, r, i)
	}
	var notified []string
	r.Subscribe(func(a []string) { notified = append(notified, a...) })
	r.ReplaceNames(guid(1), []string{"dup", "one"}, SourceProbe)
	r.ReplaceNames(guid(2), []string{"dup", "two"}, SourceProbe)
	r.AddNames(guid(3), []string{"dup"}, SourceSearchThrough)
	if g, _ := holderOf(t, r, "dup"); g != guid(1) {
		t.Fatalf("first claim must win, holder %v", g)
	}
	d := r.View().Duplicates
	if len(d) != 2 || d[0].Claimant != guid(2) || d[1].Claimant != guid(3) ||
		d[0].Holder != guid(1) || d[0].HolderAddr != addr(1) || d[0].ClaimantAddr != addr(2) ||
		d[1].ClaimantSource != SourceSearchThrough {
		t.Fatalf("duplicates %+v", d)
	}
	if c := r.Counts(); c.DuplicateNames != 1 || c.Duplicates != 2 || c.Names != 3 || c.Claims != 5 {
		t.Fatalf("counts %+v", c)
	}
	if r.st.dups.Load() != 2 {
		t.Fatalf("stats %+v", metrics.Sprint(&r.st))
	}
	notified = nil
	// The holder stops listing it: the earliest other claimant takes over.
	r.ReplaceNames(guid(1), []string{"one"}, SourceProbe)
	if g, _ := holderOf(t, r, "dup"); g != guid(2) {
		t.Fatalf("takeover by earliest claimant expected, holder %v", g)
	}
	if !slices.Equal(notified, []string{"dup"}) {
		t.Fatalf("takeover not notified: %v", notified)
	}
	d = r.View().Duplicates
	if len(d) != 1 || d[0].Holder != guid(2) || d[0].Claimant != guid(3) {
		t.Fatalf("duplicates after takeover %+v", d)
	}
	// The holder goes away: the last claimant takes over.
	r.RemoveServer(guid(2))
	if g, _ := holderOf(t, r, "dup"); g != guid(3) {
		t.Fatalf("holder after removal %v", g)
	}
	if len(r.View().Duplicates) != 0 || r.Counts().DuplicateNames != 0 {
		t.Fatalf("duplicates remain: %+v", r.View().Duplicates)
	}
	s3, _ := r.Server(guid(3))
	if s3.Held != 1 || s3.Names != 1 {
		t.Fatalf("row of new holder %+v", s3)
	}
	// A claimant that stops claiming just leaves the list.
	r.ReplaceNames(guid(1), []string{"one", "dup"}, SourceProbe)
	r.AddNames(guid(1), []string{"dup"}, SourceProbe)
	if len(r.View().Duplicates) != 1 {
		t.Fatalf("re-claim: %+v", r.View().Duplicates)
	}
	r.ReplaceNames(guid(1), []string{"one"}, SourceProbe)
	if len(r.View().Duplicates) != 0 {
		t.Fatalf("dropped claim kept: %+v", r.View().Duplicates)
	}
	if g, _ := holderOf(t, r, "dup"); g != guid(3) {
		t.Fatalf("holder changed by a claimant leaving: %v", g)
	}
}

func TestRecordPart(t *testing.T) {
	for _, c := range []struct{ in, rec string }{
		{"rec.VAL", "rec"}, {"a:b:c.HIHI", "a:b:c"}, {"rec.NAME$", "rec"}, {"rec.VAL{\"dbnd\":{\"d\":1.5}}", "rec"},
		{"rec.$", ""}, {"rec.val", ""}, {".VAL", ""}, {"rec", ""}, {"rec.", ""}, {"rec.VAL.X", ""},
		{"rec{\"a\":1.5}", ""}, {"rec.A_1", "rec"}, {"rec.VAL$x", ""},
	} {
		rec, ok := recordPart([]byte(c.in))
		if ok != (c.rec != "") || string(rec) != c.rec {
			t.Errorf("recordPart(%q) = %q,%v want %q", c.in, rec, ok, c.rec)
		}
	}
}

func TestFieldNames(t *testing.T) {
	for _, on := range []bool{false, true} {
		r, _ := newTest(t, Options{FieldNames: on})
		mustUpsert(t, r, 1)
		mustUpsert(t, r, 2)
		r.ReplaceNames(guid(1), []string{"rec", "grp"}, SourceProbe)
		r.ReplaceNames(guid(2), []string{"grp.X"}, SourceProbe) // a listed name with a dot
		g, ok := holderOf(t, r, "rec.VAL")
		if ok != on || on && g != guid(1) {
			t.Errorf("FieldNames=%v: rec.VAL -> %v,%v", on, g, ok)
		}
		if g, _ := holderOf(t, r, "grp.X"); g != guid(2) {
			t.Errorf("exact claim must win over the field rule: %v", g)
		}
		if _, ok := holderOf(t, r, "rec.lower"); ok {
			t.Errorf("lower-case field answered")
		}
		out := make([]*Holder, 1)
		r.LookupBatch([]pva.SearchName{{Name: []byte("rec.HIHI")}}, out)
		if (out[0] != nil) != on {
			t.Errorf("FieldNames=%v: batch lookup %v", on, out[0])
		}
	}
}

func TestBounds(t *testing.T) {
	r, _ := newTest(t, Options{MaxServers: 2, MaxNames: 5})
	mustUpsert(t, r, 1)
	mustUpsert(t, r, 2)
	if _, err := r.UpsertServer(ServerInfo{GUID: guid(3), Addr: addr(3)}); !errors.Is(err, ErrServerLimit) {
		t.Fatalf("third server: %v", err)
	}
	if _, err := r.UpsertServer(ServerInfo{GUID: guid(1), Addr: addr(1)}); err != nil {
		t.Fatalf("refresh of a known server at the bound: %v", err)
	}
	if err := r.ReplaceNames(guid(1), []string{"a", "b", "c", "d"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	if err := r.ReplaceNames(guid(2), []string{"e", "f", "g"}, SourceProbe); !errors.Is(err, ErrNameLimit) {
		t.Fatalf("over the name bound: %v", err)
	}
	if c := r.Counts(); c.Claims != 5 || c.Servers != 2 {
		t.Fatalf("counts %+v", c)
	}
	if err := r.AddNames(guid(2), []string{"h"}, SourceStatic); !errors.Is(err, ErrNameLimit) {
		t.Fatalf("AddNames over bound: %v", err)
	}
	// A replace that frees room may use it.
	if err := r.ReplaceNames(guid(1), []string{"a"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	if err := r.ReplaceNames(guid(2), []string{"e", "f", "g", "h"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	if r.st.serverLimit.Load() != 1 || r.st.nameLimit.Load() != 3 {
		t.Fatalf("stats %+v", metrics.Sprint(&r.st))
	}
}

func TestSnapshotRoundTripAndExpiry(t *testing.T) {
	r, fc := newTest(t, Options{UnverifiedTTL: time.Minute})
	for i := 1; i <= 3; i++ {
		mustUpsert(t, r, i)
	}
	r.ReplaceNames(guid(1), []string{"a", "dup", "b"}, SourceProbe)
	r.ReplaceNames(guid(2), []string{"dup", "c"}, SourceProbe)
	r.AddNames(guid(3), []string{"dup"}, SourceSearchThrough)
	r.AddNames(guid(3), []string{"st"}, SourceStatic)
	r.SetProbeState(guid(2), ProbeFailed, errors.New("boom"))
	dir := t.TempDir()
	path := filepath.Join(dir, "registry.snap")
	if err := r.SaveSnapshot(path); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temp files left: %v", ents)
	}

	r2, fc2 := newTest(t, Options{UnverifiedTTL: time.Minute})
	fc2.Set(fc.Now().Add(time.Hour))
	var notified []string
	r2.Subscribe(func(a []string) { notified = append(notified, a...) })
	if err := r2.LoadSnapshot(path); err != nil {
		t.Fatal(err)
	}
	if err := r2.LoadSnapshot(path); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("second load: %v", err)
	}
	slices.Sort(notified)
	if !slices.Equal(notified, []string{"a", "b", "c", "dup", "st"}) {
		t.Fatalf("load notified %v", notified)
	}
	if !sameNames(listNames(r, "", 0), listNames(r2, "", 0)) {
		t.Fatalf("names differ:\n%v\n%v", listNames(r, "", 0), listNames(r2, "", 0))
	}
	d1, d2 := r.View().Duplicates, r2.View().Duplicates
	if len(d1) != len(d2) {
		t.Fatalf("duplicates %v vs %v", d1, d2)
	}
	for i := range d1 {
		if d1[i].Name != d2[i].Name || d1[i].Holder != d2[i].Holder || d1[i].Claimant != d2[i].Claimant {
			t.Fatalf("duplicate %d: %+v vs %+v", i, d1[i], d2[i])
		}
	}
	for _, s := range r.Servers() {
		s2, ok := r2.Server(s.GUID)
		if !ok || s2.Verified || !s2.LoadedAt.Equal(fc2.Now()) || s2.Addr != s.Addr || s2.Names != s.Names ||
			s2.Held != s.Held || !s2.FirstSeen.Equal(s.FirstSeen) || !s2.ListedAt.Equal(s.ListedAt) {
			t.Fatalf("server %v: %+v vs %+v", s.GUID, s2, s)
		}
	}
	if c := r2.Counts(); c.Unverified != 3 {
		t.Fatalf("counts %+v", c)
	}
	// A beacon (a hint) confirms nothing (the trust rule). Confirm two servers
	// over TCP, one by a live probe connection and one by a listing; the
	// third (holder of "dup") expires and the earliest claimant takes over.
	fc2.Advance(30 * time.Second)
	r2.UpsertServer(ServerInfo{GUID: guid(2), Addr: addr(2)})
	if c := r2.Counts(); c.Unverified != 3 {
		t.Fatalf("a beacon confirmed a snapshot server: %+v", c)
	}
	r2.SetProbeState(guid(2), ProbeConnected, nil)
	r2.ReplaceNames(guid(3), []string{"dup", "st"}, SourceProbe)
	fc2.Advance(29 * time.Second)
	if _, ok := r2.Server(guid(1)); !ok {
		t.Fatal("expired early")
	}
	fc2.Advance(time.Second)
	if _, ok := r2.Server(guid(1)); ok {
		t.Fatal("unconfirmed server kept past the TTL")
	}
	if g, _ := holderOf(t, r2, "dup"); g != guid(2) {
		t.Fatalf("dup holder after expiry: %v", g)
	}
	if _, ok := r2.Server(guid(2)); !ok {
		t.Fatal("confirmed server expired")
	}
	if r2.st.expired.Load() != 1 {
		t.Fatalf("stats %+v", metrics.Sprint(&r2.st))
	}
}

func TestSnapshotDamaged(t *testing.T) {
	r, _ := newTest(t, Options{})
	mustUpsert(t, r, 1)
	r.ReplaceNames(guid(1), []string{"a", "b"}, SourceProbe)
	path := filepath.Join(t.TempDir(), "s")
	if err := r.SaveSnapshot(path); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	for name, data := range map[string][]byte{
		"truncated": good[:len(good)-3],
		"flipped":   append(append([]byte{}, good[:20]...), append([]byte{good[20] ^ 0x40}, good[21:]...)...),
		"magic":     append([]byte("XXXXXXXX"), good[8:]...),
		"empty":     nil,
	} {
		os.WriteFile(path, data, 0o600)
		r2, _ := newTest(t, Options{})
		if err := r2.LoadSnapshot(path); !errors.Is(err, ErrSnapshot) {
			t.Errorf("%s: err %v", name, err)
		}
		if c := r2.Counts(); c.Servers != 0 || c.Names != 0 {
			t.Errorf("%s: registry not empty after a bad load: %+v", name, c)
		}
	}
	r2, _ := newTest(t, Options{})
	if err := r2.LoadSnapshot(filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func sameNames(a, b []NameInfo) bool {
	return slices.EqualFunc(a, b, func(x, y NameInfo) bool {
		return x.Name == y.Name && x.GUID == y.GUID && x.Addr == y.Addr && x.How == y.How && x.At.Equal(y.At) && x.Claimant == y.Claimant
	})
}
