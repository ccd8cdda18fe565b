package resolver

import (
	"strings"
	"testing"

	"github.com/pvans-project/pvans/internal/registry"
)

// A name the policy refuses is treated as held by nobody: a held one is
// not claimed, an unheld one is not reported missing, never waited for,
// never searched through, and never pushed when a server later claims it.
func TestDeniedNameNeverClaimedWaitedOrSearched(t *testing.T) {
	deny := func(n []byte) bool { return !strings.HasPrefix(string(n), "secret:") }
	f := newFixture(t, registry.Options{}, Options{NameAllowed: deny})
	s := &searcher{}
	f.res.SetSearcher(s)
	f.reg.ReplaceNames(guid(1), []string{"secret:held", "open:held"}, registry.SourceProbe)

	q := query("secret:held", "open:held", "secret:unheld", "open:unheld")
	var b Batch
	f.res.Lookup(q, &b)
	if len(b.Groups) != 1 || len(b.Groups[0].CIDs) != 1 || b.Groups[0].CIDs[0] != q[1].CID {
		t.Fatalf("groups %+v: want only open:held claimed", b.Groups)
	}
	if len(b.Missing) != 1 || b.Missing[0] != 3 {
		t.Fatalf("missing %v: want only open:unheld (index 3)", b.Missing)
	}
	p := &pushes{}
	c := f.res.NewClient(p.push)
	defer c.Close()
	// Wait is given the denied index too (a careless caller): still refused.
	c.Wait(q, []int{0, 2, 3}, OfferTCP)
	if c.Waiting() != 1 {
		t.Fatalf("waiting %d, want 1", c.Waiting())
	}
	if len(s.want) != 1 || s.want[0] != "open:unheld" {
		t.Fatalf("searched through %v, want only open:unheld", s.want)
	}
	f.reg.AddNames(guid(2), []string{"secret:unheld", "open:unheld"}, registry.SourceProbe)
	got := p.take()
	if len(got) != 1 || len(got[0].CIDs) != 1 || got[0].CIDs[0] != q[3].CID {
		t.Fatalf("pushed %+v: want only open:unheld", got)
	}
	if f.res.st.denied.Load() != 4 || f.res.st.misses.Load() != 1 {
		t.Errorf("denied %d, misses %d: want 2 denied per Lookup and Wait call", f.res.st.denied.Load(), f.res.st.misses.Load())
	}
}

// Without a policy every name goes through (and the test above is not
// passing by accident).
func TestNoNamePolicyAllowsAll(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	f.reg.ReplaceNames(guid(1), []string{"secret:held"}, registry.SourceProbe)
	var b Batch
	f.res.Lookup(query("secret:held", "secret:unheld"), &b)
	if len(b.Groups) != 1 || len(b.Missing) != 1 || f.res.st.denied.Load() != 0 {
		t.Fatalf("groups %+v missing %v", b.Groups, b.Missing)
	}
}
