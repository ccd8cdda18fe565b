package daemon

import (
	"fmt"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// A Phoebus Java server (simulated: no beacons, no `server` PV, negative
// CIDs taken as pings) on pvans's search destination: the start-up
// discovery finds it, its probe files it as unlistable well before the
// probe's timeout, and every one of its names resolves for a TCP client
// through search-through (with random 32-bit CIDs, about half of them
// were taken as pings and never claimed).
func TestJavaServerEveryNameResolves(t *testing.T) {
	const n = 40
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("java:pv%d", i)
	}
	site := startSite(t, sim.Options{Java: true, Names: [][]string{names}, Host: lo, UpdateInterval: -1})
	srv := site.Server(0)
	d := startDaemon(t, testConfig(t, srv.UDP))
	testutil.WaitFor(t, 30*time.Second, "the Java server filed as unlistable", func() bool {
		s, ok := d.Registry.Server(srv.GUID)
		return ok && s.ProbeState == registry.ProbeFailed && s.ProbeError == probe.FailUnlistable
	})
	cl := query(t, d)
	if err := cl.Search(names); err != nil {
		t.Fatal(err)
	}
	for _, a := range waitAnswers(t, cl, 10*time.Second) {
		if a.GUID != srv.GUID || a.Endpoint != srv.TCP {
			t.Fatalf("%s answered %s at %v, want %s at %v", a.Name, a.GUID, a.Endpoint, srv.GUID, srv.TCP)
		}
	}
	if s, ok := d.Registry.Server(srv.GUID); !ok || s.Addr != srv.TCP {
		t.Fatalf("the Java server's row: %+v %v", s, ok)
	}
	if w := site.Server(0).UnknownCreates; w != 1 {
		t.Fatalf("%d CREATE_CHANNEL warnings in the Java server's log, want 1", w)
	}
}
