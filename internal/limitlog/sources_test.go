package limitlog

import (
	"net/netip"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pvans-project/pvans/internal/clock"
)

// One line per source per interval, at info; the table stays bounded
// however many sources come.
func TestSourcesOneLinePerSourcePerInterval(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	clk := clock.NewFake(time.Unix(1000, 0))
	s := NewSources(zap.New(core), time.Minute, 4, clk)
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	for range 100 {
		s.Hit(a, "refused")
		s.Hit(b, "refused")
	}
	if n := logs.Len(); n != 2 {
		t.Fatalf("%d lines for 2 sources in one interval, want 2", n)
	}
	clk.Advance(time.Minute)
	s.Hit(a, "refused")
	l := logs.All()
	if len(l) != 3 || l[2].Level != zap.InfoLevel || l[2].ContextMap()["more_since_last_line"] != uint64(99) {
		t.Fatalf("after a minute: %d lines, last %v", len(l), l[len(l)-1].ContextMap())
	}
	// 1000 new sources in one interval: at most 4 remembered, the rest
	// not logged but counted.
	for i := range 1000 {
		s.Hit(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), "refused")
	}
	if s.Len() > 4 || s.Suppressed() == 0 {
		t.Fatalf("table %d (bound 4), suppressed %d", s.Len(), s.Suppressed())
	}
	// Once their interval passes, new sources are logged again.
	clk.Advance(time.Minute)
	before := logs.Len()
	s.Hit(netip.MustParseAddr("10.9.9.9"), "refused")
	if logs.Len() != before+1 || s.Len() > 4 {
		t.Fatalf("a new source after the interval: %d new lines, table %d", logs.Len()-before, s.Len())
	}
}
