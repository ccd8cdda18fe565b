package ratelimit

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
)

var (
	srcA = netip.MustParseAddr("192.0.2.1")
	srcB = netip.MustParseAddr("192.0.2.2")
)

func allowN(l *Limiter, a netip.Addr, n int) int {
	ok := 0
	for i := 0; i < n; i++ {
		if l.Allow(a) {
			ok++
		}
	}
	return ok
}

// A source gets its burst at once, then exactly one event per 1/rate;
// another source has its own bucket.
func TestLimiterBurstThenRate(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	l := New(Options{Rate: 10, Burst: 5, Clock: clk})
	if got := allowN(l, srcA, 100); got != 5 {
		t.Fatalf("burst: %d allowed, want 5", got)
	}
	if !l.Allow(srcB) {
		t.Fatal("another source was limited by A's flood")
	}
	clk.Advance(99 * time.Millisecond)
	if l.Allow(srcA) {
		t.Fatal("token before 1/rate elapsed")
	}
	clk.Advance(time.Millisecond)
	if !l.Allow(srcA) || l.Allow(srcA) {
		t.Fatal("want exactly one token after 100ms")
	}
	// A long pause refills to the burst, not beyond.
	clk.Advance(time.Hour)
	if got := allowN(l, srcA, 100); got != 5 {
		t.Fatalf("after a pause: %d allowed, want 5", got)
	}
	// Over 10 s of steady flooding: burst is spent, then 10/s.
	clk.Advance(time.Hour)
	total := 0
	for i := 0; i < 1000; i++ {
		total += allowN(l, srcA, 10)
		clk.Advance(10 * time.Millisecond)
	}
	if want := 5 + 100 - 1; total < want || total > want+1 {
		t.Fatalf("10 s flood: %d allowed, want %d..%d", total, want, want+1)
	}
	st := l.Stats()
	if st.Sources != 2 || st.Allowed == 0 || st.Limited == 0 {
		t.Errorf("stats %+v", st)
	}
}

// AllowN spends n tokens at once or none: a source's budget in names is
// its burst at once, then rate per second, whatever the sizes of the
// requests; a request above the burst never passes.
func TestLimiterAllowN(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	l := New(Options{Rate: 1000, Burst: 100, Clock: clk})
	if l.AllowN(srcA, 101) {
		t.Fatal("a cost above the burst was allowed")
	}
	if !l.AllowN(srcA, 60) || !l.AllowN(srcA, 40) {
		t.Fatal("60+40 within a burst of 100 refused")
	}
	if l.AllowN(srcA, 1) {
		t.Fatal("token beyond the burst")
	}
	clk.Advance(9 * time.Millisecond)
	if l.AllowN(srcA, 10) {
		t.Fatal("10 tokens after 9 ms at 1000/s")
	}
	if !l.AllowN(srcA, 9) || l.Allow(srcA) {
		t.Fatal("want exactly 9 tokens after 9 ms (a refused request spends none)")
	}
	if !l.AllowN(srcB, 100) {
		t.Fatal("another source limited by A")
	}
	if l.AllowN(srcA, 1<<62) || l.AllowN(srcA, 0) {
		t.Fatal("a huge cost must be refused, not wrap; n<1 counts as 1 (the bucket is empty)")
	}
}

// IPv4-mapped IPv6 is the same source as the IPv4 address.
func TestLimiterMappedIsSameSource(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	l := New(Options{Rate: 1, Burst: 1, Clock: clk})
	if !l.Allow(srcA) {
		t.Fatal("first")
	}
	if l.Allow(netip.AddrFrom16(srcA.As16())) {
		t.Fatal("mapped form got a bucket of its own")
	}
}

func TestLimiterZeroRateIsUnlimited(t *testing.T) {
	var l *Limiter = New(Options{Rate: 0, Burst: 1})
	if l != nil {
		t.Fatal("zero rate must give a nil limiter")
	}
	if allowN(l, srcA, 1000) != 1000 {
		t.Fatal("nil limiter refused")
	}
	_ = l.Stats()
}

func TestLimiterExempt(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	l := New(Options{Rate: 1, Burst: 1, Clock: clk, Exempt: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/31")}})
	if allowN(l, srcA, 50) != 50 {
		t.Fatal("exempt source limited")
	}
	if allowN(l, srcB, 50) != 1 {
		t.Fatal("non-exempt source not limited")
	}
}

// A flood of distinct (spoofed) sources never holds more than Sources
// entries; the least recently seen is evicted, a recently seen one kept.
func TestLimiterBoundedTable(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	l := New(Options{Rate: 1, Burst: 1, Sources: 64, Clock: clk})
	l.Allow(srcA) // spends A's token
	for i := 0; i < 10_000; i++ {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		l.Allow(a)
		if i%32 == 0 && l.Allow(srcA) {
			t.Fatal("A (kept recent) got a fresh bucket")
		}
	}
	st := l.Stats()
	if st.Sources != 64 || st.Evictions != 10_000+1-64 {
		t.Fatalf("stats %+v", st)
	}
	if got := len(l.t.ents); got != 64 {
		t.Fatalf("table grew to %d", got)
	}
	// Now let A go stale: 64 new sources evict it; it starts again full.
	for i := 0; i < 64; i++ {
		l.Allow(netip.AddrFrom4([4]byte{11, 0, 0, byte(i)}))
	}
	if !l.Allow(srcA) {
		t.Fatal("evicted source should start with a full bucket")
	}
}

// The LRU list stays consistent under every access order.
func TestTableOrder(t *testing.T) {
	tb := newTable[netip.Addr, int](3)
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}) }
	for i := 1; i <= 3; i++ {
		v, fresh := tb.get(addr(i))
		if !fresh {
			t.Fatal("not fresh")
		}
		*v = i
	}
	tb.get(addr(1)) // order now 1,3,2 (most recent first)
	v, fresh := tb.get(addr(4))
	if !fresh || *v != 0 {
		t.Fatal("new entry not zeroed")
	}
	if _, ok := tb.idx[addr(2)]; ok {
		t.Fatal("2 (least recent) not evicted")
	}
	var order []int
	for i := tb.head; i >= 0; i = tb.ents[i].next {
		order = append(order, int(tb.ents[i].addr.As4()[3]))
	}
	if len(order) != 3 || order[0] != 4 || order[1] != 1 || order[2] != 3 {
		t.Fatalf("order %v", order)
	}
	var back []int
	for i := tb.tail; i >= 0; i = tb.ents[i].prev {
		back = append(back, int(tb.ents[i].addr.As4()[3]))
	}
	if len(back) != 3 || back[0] != 3 || back[2] != 4 {
		t.Fatalf("reverse order %v", back)
	}
}

// Reply bytes never exceed ratio × bytes received in the window; the
// window rolls exactly; unknown destinations get nothing.
func TestReflectionCap(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	r := NewReflection(ReflectionOptions{Ratio: 4, Window: 10 * time.Second, Clock: clk})
	if r.Reply(srcA, 1) {
		t.Fatal("reply to an address that sent nothing")
	}
	r.Received(srcA, 50)
	if !r.Reply(srcA, 120) || !r.Reply(srcA, 80) {
		t.Fatal("within 4×50")
	}
	if r.Reply(srcA, 1) {
		t.Fatal("beyond 200 bytes")
	}
	if r.Reply(srcB, 1) {
		t.Fatal("B credited by A")
	}
	r.Received(srcA, 10)
	if !r.Reply(srcA, 40) || r.Reply(srcA, 1) {
		t.Fatal("credit of 10 more bytes is exactly 40")
	}
	clk.Advance(10*time.Second - time.Nanosecond)
	if r.Reply(srcA, 1) {
		t.Fatal("window rolled early")
	}
	clk.Advance(time.Nanosecond)
	if r.Reply(srcA, 1) {
		t.Fatal("new window carried old credit")
	}
	r.Received(srcA, 1)
	if !r.Reply(srcA, 4) || r.Reply(srcA, 1) {
		t.Fatal("fresh window: 4×1")
	}
	st := r.Stats()
	if st.Replies != 4 || st.Capped != 7 || st.CappedBytes != 7 {
		t.Errorf("stats %+v", st)
	}
}

// A reservation (a re-answer paid for with its answer) takes from the
// same budget as the replies and counts none.
func TestReflectionReserve(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	r := NewReflection(ReflectionOptions{Ratio: 4, Window: 10 * time.Second, Clock: clk})
	if r.Reserve(srcA, 1) {
		t.Fatal("reserved for an address that sent nothing")
	}
	r.Received(srcA, 50)
	if !r.Reply(srcA, 100) || !r.Reserve(srcA, 100) {
		t.Fatal("within 4×50")
	}
	if r.Reserve(srcA, 1) || r.Reply(srcA, 1) {
		t.Fatal("beyond 200 bytes")
	}
	if st := r.Stats(); st.Replies != 1 || st.Capped != 1 {
		t.Errorf("stats %+v", st)
	}
	var off *Reflection
	if !off.Reserve(srcA, 1<<20) {
		t.Fatal("no cap refused a reservation")
	}
}

func TestReflectionExemptAndOff(t *testing.T) {
	if NewReflection(ReflectionOptions{Ratio: 0}) != nil {
		t.Fatal("ratio 0 must mean off (nil)")
	}
	var off *Reflection
	if !off.Reply(srcA, 1<<20) {
		t.Fatal("nil reflection refused")
	}
	off.Received(srcA, 1)
	r := NewReflection(ReflectionOptions{Ratio: 1, Clock: clock.NewFake(time.Time{}),
		Exempt: []netip.Prefix{netip.MustParsePrefix("192.0.2.1/32")}})
	if !r.Reply(srcA, 1<<20) {
		t.Fatal("exempt address capped")
	}
	if r.Reply(srcB, 1) {
		t.Fatal("non-exempt address not capped")
	}
}

// Without a window (a zero Window) received bytes never expire, and
// neither do replies sent: the ratio holds over all time.
func TestReflectionWithoutWindow(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	r := NewReflection(ReflectionOptions{Ratio: 2, Clock: clk})
	r.Received(srcA, 10)
	clk.Advance(24 * time.Hour)
	if !r.Reply(srcA, 20) || r.Reply(srcA, 1) {
		t.Fatal("a day later: want exactly 2×10 bytes allowed")
	}
	clk.Advance(24 * time.Hour)
	r.Received(srcA, 1)
	if !r.Reply(srcA, 2) || r.Reply(srcA, 1) {
		t.Fatal("after 1 more byte received: want exactly 2 more allowed")
	}
}

func BenchmarkLimiterAllow(b *testing.B) {
	l := New(Options{Rate: 1e9, Burst: 1 << 30})
	addrs := make([]netip.Addr, 1024)
	for i := range addrs {
		addrs[i] = netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l.Allow(addrs[i&1023])
	}
}

func BenchmarkLimiterSpoofFlood(b *testing.B) {
	l := New(Options{Rate: 1000, Burst: 2000, Sources: 4096})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l.Allow(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
}

func BenchmarkReflection(b *testing.B) {
	r := NewReflection(ReflectionOptions{Ratio: 4})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r.Received(srcA, 40)
		r.Reply(srcA, 60)
	}
}
