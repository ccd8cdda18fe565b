package events

import (
	"net/netip"
	"testing"
	"time"
)

func TestDownKeptForAWhile(t *testing.T) {
	d := NewDown()
	t0 := time.Unix(1000, 0)
	a, b := netip.MustParseAddrPort("10.0.0.1:5075"), netip.MustParseAddrPort("10.0.0.2:5075")
	d.Lost(DownServer{GUID: "a", Endpoint: a, Since: t0, Reason: "no reply to echo"})
	d.Lost(DownServer{GUID: "b", Endpoint: b, Since: t0.Add(time.Minute)})
	if l := d.List(t0.Add(2*time.Minute), time.Hour); len(l) != 2 || l[0].GUID != "b" {
		t.Fatalf("List = %+v, want b then a", l)
	}
	d.Back(b)
	if l := d.List(t0.Add(2*time.Minute), time.Hour); len(l) != 1 || l[0].GUID != "a" {
		t.Fatalf("after b came back: %+v", l)
	}
	if l := d.List(t0.Add(time.Hour), time.Hour); len(l) != 0 {
		t.Fatalf("kept past the while: %+v", l)
	}
	if l := d.List(t0, 0); len(l) != 0 {
		t.Fatalf("keep 0 lists %+v", l)
	}
}

func TestDownBounded(t *testing.T) {
	d := NewDown()
	t0 := time.Unix(1000, 0)
	for i := range MaxDown + 10 {
		ep := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 5075)
		d.Lost(DownServer{Endpoint: ep, Since: t0.Add(time.Duration(i) * time.Second)})
	}
	l := d.List(t0.Add(time.Duration(MaxDown+10)*time.Second), 24*time.Hour)
	if len(l) != MaxDown || d.Evicted() != 10 {
		t.Fatalf("%d kept, %d evicted, want %d and 10", len(l), d.Evicted(), MaxDown)
	}
	if oldest := l[len(l)-1].Since; !oldest.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("oldest kept lost at %v, want the 10 oldest gone", oldest.Sub(t0))
	}
}
