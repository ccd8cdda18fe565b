package resolver

import (
	"slices"
	"testing"

	"github.com/pvans-project/pvans/internal/registry"
)

type kindSearcher struct{ want, drop []wantKey }

func (s *kindSearcher) Want(n string, tls bool) { s.want = append(s.want, wantKey{n, tls}) }
func (s *kindSearcher) Drop(n string, tls bool) { s.drop = append(s.drop, wantKey{n, tls}) }

// TestPushFollowsTheSearch: waiters remember whether their search listed
// "tls"; the search through is asked per kind, pushes say which kind they
// answer (Group.TLS), and a search-through answer for one kind answers
// none of the other.
func TestPushFollowsTheSearch(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	s := &kindSearcher{}
	f.res.SetSearcher(s)
	var p1, p2 pushes
	c1, c2 := f.res.NewClient(p1.push), f.res.NewClient(p2.push)
	q := query("x", "y")
	c1.Wait(q[:1], []int{0}, true)  // x, offering TLS
	c1.Wait(q[1:], []int{0}, false) // y, plain, same connection
	c2.Wait(q[:1], []int{0}, false) // x, plain
	want := []wantKey{{"x", true}, {"y", false}, {"x", false}}
	if !slices.Equal(s.want, want) {
		t.Fatalf("Want %v, want %v", s.want, want)
	}

	// A search-through "tls" answer for x goes to the TLS waiter only.
	if n := f.res.Answer("x", true, Endpoint{GUID: guid(7), Addr: addr(7), Protocol: "tls"}); n != 1 {
		t.Fatalf("Answer(x, tls) answered %d waiters, want 1", n)
	}
	if g := p1.take(); len(g) != 1 || !g[0].TLS || g[0].CIDs[0] != q[0].CID {
		t.Fatalf("TLS waiter pushed %+v", g)
	}
	if g := p2.take(); len(g) != 0 {
		t.Fatalf("plain waiter pushed a TLS answer: %+v", g)
	}
	if !slices.Equal(s.drop, []wantKey{{"x", true}}) {
		t.Fatalf("Drop %v, want only the TLS search of x", s.drop)
	}

	// The registry answers both kinds, each push marked with its own.
	f.reg.ReplaceNames(guid(1), []string{"x", "y"}, registry.SourceProbe)
	if g := p1.take(); len(g) != 1 || g[0].TLS || g[0].CIDs[0] != q[1].CID {
		t.Fatalf("plain y on the TLS-searching connection pushed %+v", g)
	}
	if g := p2.take(); len(g) != 1 || g[0].TLS {
		t.Fatalf("plain x pushed %+v", g)
	}
}
