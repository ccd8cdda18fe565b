package resolver

import (
	"testing"

	"github.com/pvans-project/pvans/internal/registry"
)

// A PVXS client searches again on each loss and waits; each restart then
// answers it once (the waiter's push), and what is remembered for it
// stays one entry.
func TestRestartsWithWaitingClientOneEntry(t *testing.T) {
	f := newFixture(t, registry.Options{}, Options{})
	var tcp pushes
	if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(101), Addr: addr(1)}, []string{"w:a"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	cl := f.res.NewClient(tcp.push)
	q := query("w:a")
	var b Batch
	f.res.Lookup(q, &b)
	for gi := range b.Groups {
		cl.Told(q, &b, gi, OfferTCP)
	}
	total := 0
	for i := 2; i <= 9; i++ {
		f.reg.RemoveServer(guid(100 + i - 1))
		var b Batch
		f.res.Lookup(q, &b)
		cl.Wait(q, b.Missing, OfferTCP)
		if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(100 + i), Addr: addr(1)}, []string{"w:a"}, registry.SourceProbe); err != nil {
			t.Fatal(err)
		}
		for _, g := range tcp.take() {
			total += len(g.CIDs)
		}
		if st := f.res.Stats(); st.Told != 1 {
			t.Fatalf("restart %d: %d answers remembered for one client and CID, want 1 (stats %+v)", i, st.Told, st)
		}
	}
	if total > 8*2 {
		t.Errorf("%d answers pushed over 8 restarts", total)
	}
	t.Logf("%d answers pushed over 8 restarts, re-answers %d", total, f.res.st.reTCP.Load())
}
