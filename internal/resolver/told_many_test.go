package resolver

import (
	"net/netip"
	"testing"

	"github.com/pvans-project/pvans/internal/registry"
)

// One client through many restarts keeps one remembered answer per CID,
// and is re-answered once per restart: entries do not pile up.
func TestManyRestartsOneAnswerEach(t *testing.T) {
	for _, lostFirst := range []bool{false, true} {
		f := newFixture(t, registry.Options{}, Options{})
		var tcp pushes
		var udp udpSink
		f.res.SetUDPSink(udp.sink)
		if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(101), Addr: addr(1)}, []string{"m:a"}, registry.SourceProbe); err != nil {
			t.Fatal(err)
		}
		cl := f.res.NewClient(tcp.push)
		other := f.res.NewClient(func(Group) {})
		to := UDPDest{To: netip.MustParseAddrPort("10.0.0.9:40001")}
		toldBoth(f, cl, to, "m:a")
		for i := 2; i <= 8; i++ {
			if lostFirst {
				f.reg.RemoveServer(guid(100 + i - 1))
			}
			if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(100 + i), Addr: addr(1)}, []string{"m:a"}, registry.SourceProbe); err != nil {
				t.Fatal(err)
			}
			gs := tcp.take()
			n := 0
			for _, g := range gs {
				n += len(g.CIDs)
			}
			if n != 1 {
				t.Fatalf("lost first %v, restart %d: %d TCP re-answers %+v, want 1", lostFirst, i, n, gs)
			}
			// The UDP client searches again and is answered (pvAccessCPP
			// after its connect fails, or on its own schedule).
			toldBoth(f, other, to, "m:a")
			if st := f.res.Stats(); st.Told > 3 {
				t.Fatalf("lost first %v, restart %d: %d answers remembered, want at most 3 (one a client)", lostFirst, i, st.Told)
			}
		}
	}
}
