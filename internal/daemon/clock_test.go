package daemon

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pva"
)

// What the daemon records about a server (events, the registry's last
// sighting) is stamped by the daemon's clock, the one the registry and the
// beacon tracker expire by: a wall-clock stamp beside a fake or skewed
// clock would make a fresh sighting look hours old (or new).
func TestFlowsStampWithTheDaemonClock(t *testing.T) {
	d := newIdleDaemon(t, testConfig(t))
	want := d.clk.Now()
	g, ep := pva.GUID{7}, netip.MustParseAddrPort("127.0.0.1:5075")
	probeSink{d}.Listed(g, ep, []string{"clock:pv"}, probe.Info{})
	s, ok := d.Registry.Server(g)
	if !ok {
		t.Fatal("listed server not registered")
	}
	if !s.LastSeen.Equal(want) {
		t.Errorf("LastSeen %v, want the daemon clock's %v", s.LastSeen, want)
	}
	probeSink{d}.Lost(g, ep, "watch closed")
	for _, e := range d.Events.Recent(0) {
		if !e.At.Equal(want) {
			t.Errorf("event %q at %v, want the daemon clock's %v", e.Kind, e.At, want)
		}
	}
	if time.Since(want) < time.Hour {
		t.Fatal("the idle daemon's fake clock must be far from the wall clock for this test to mean anything")
	}
}
