package resolver

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/registry"
)

// benchTold is a resolver holding 38 names of one server, a search for
// them looked up, and the fake clock.
func benchTold(b *testing.B) (*Resolver, *clock.Fake, func(d UDPDest)) {
	fc := clock.NewFake(time.Time{})
	reg := registry.New(registry.Options{Clock: fc})
	res := New(reg, Options{Clock: fc})
	b.Cleanup(res.Close)
	reg.UpsertServer(registry.ServerInfo{GUID: guid(1), Addr: addr(1)})
	names := make([]string, 38)
	for i := range names {
		names[i] = fmt.Sprintf("bench:rec%04d:ai%d", i*2111, i)
	}
	reg.ReplaceNames(guid(1), names, registry.SourceProbe)
	sq := query(names...)
	var bt Batch
	res.Lookup(sq, &bt)
	return res, fc, func(d UDPDest) { res.ToldUDP(d, sq, &bt, 0, bt.Groups[0].CIDs, OfferTCP) }
}

// Remembering the answer to a 38-name search again at once (a client
// re-searching names it was answered): the answer path's added cost in a
// flood of repeated searches.
func BenchmarkToldUDP38(b *testing.B) {
	_, _, told := benchTold(b)
	d := UDPDest{To: netip.MustParseAddrPort("10.0.0.9:5555")}
	b.ReportAllocs()
	for b.Loop() {
		told(d)
	}
}

// The same answer told again 6 s later each time: every entry is moved
// to its lists' ends.
func BenchmarkToldUDP38Later(b *testing.B) {
	_, fc, told := benchTold(b)
	d := UDPDest{To: netip.MustParseAddrPort("10.0.0.9:5555")}
	b.ReportAllocs()
	for b.Loop() {
		fc.Advance(6 * time.Second)
		told(d)
	}
}

// Each answer to another reply address: 38 new entries per search, the
// oldest forgotten at ToldTotal once full (a spoofed flood's cost).
func BenchmarkToldUDP38New(b *testing.B) {
	_, _, told := benchTold(b)
	a := netip.MustParseAddr("10.0.0.9")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		told(UDPDest{To: netip.AddrPortFrom(a, uint16(i))})
		i++
	}
}
