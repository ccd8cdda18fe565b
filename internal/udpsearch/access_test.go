package udpsearch

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
)

var (
	lanC1  = netip.MustParseAddrPort("10.0.0.9:40000")
	lanC2  = netip.MustParseAddrPort("10.0.0.10:40000")
	victim = netip.MustParseAddr("10.0.0.77")
	srvC   = resolver.Endpoint{GUID: pva.GUID{0xCC}, Addr: netip.MustParseAddrPort("127.0.0.1:5095"), Protocol: "tcp"}
)

// threeServers holds one name on each of three servers, so a search for
// all three draws three replies.
func threeServers() *mapResolver {
	return newMapResolver(map[string]resolver.Endpoint{"a": srvA, "b": srvB, "c": srvC})
}

// broadcastFrom is a LAN broadcast search from src (answered directly).
func broadcastFrom(b []byte, src netip.AddrPort) *datagram {
	return &datagram{b: b, src: src, dst: ipEthBc, ifIndex: 2}
}

func repliesTo(out *recSender, a netip.Addr) (n, bytes int) {
	for _, r := range out.replies {
		if r.to.Addr() == a {
			n++
			bytes += len(r.b)
		}
	}
	return
}

// A search from a denied client, or asking for replies at a denied
// address, is dropped; an allowed client is answered.
func TestUDPClientAccess(t *testing.T) {
	out := &recSender{}
	deny := func(a netip.Addr) bool { return a != lanC1.Addr() && a != victim }
	h, st := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry(), ClientAllowed: deny}, out)
	msg := searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1")
	h.handle(broadcastFrom(msg, lanC1))
	if len(out.replies) != 0 {
		t.Fatalf("denied client answered: %+v", out.replies)
	}
	h.handle(broadcastFrom(searchMsg(0, victim, 40000, []string{"tcp"}, "cap:a:mbox1"), lanC2))
	if len(out.replies) != 0 {
		t.Fatal("reply sent to a denied reply address")
	}
	h.handle(broadcastFrom(msg, lanC2))
	if n, _ := repliesTo(out, lanC2.Addr()); n != 1 || len(out.replies) != 1 {
		t.Fatalf("allowed client: %d replies", len(out.replies))
	}
	if st.dropDenied.Load() != 2 || st.responses.Load() != 1 {
		t.Fatalf("stats %+v", metrics.Sprint(st))
	}
}

// Beyond its rate a client's searches are dropped (MustReply or not);
// another client is still answered; the bucket refills with the clock.
func TestUDPSearchRatePerClient(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	out := &recSender{}
	h, st := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry(), Clock: clk,
		SearchRate: 10, SearchBurst: 3}, out)
	msg := searchMsg(pva.SearchMustReply, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1")
	for range 20 {
		h.handle(broadcastFrom(msg, lanC1))
	}
	if n, _ := repliesTo(out, lanC1.Addr()); n != 3 {
		t.Fatalf("flooding client answered %d times, want its burst of 3", n)
	}
	h.handle(broadcastFrom(msg, lanC2))
	if n, _ := repliesTo(out, lanC2.Addr()); n != 1 {
		t.Fatal("another client not answered during the flood")
	}
	clk.Advance(100 * time.Millisecond)
	for range 5 {
		h.handle(broadcastFrom(msg, lanC1))
	}
	if n, _ := repliesTo(out, lanC1.Addr()); n != 4 {
		t.Fatalf("after 1/rate: %d answers, want 4", n)
	}
	if st.dropRateLimited.Load() != 17+4 {
		t.Fatalf("rate-limited %d, want 21", st.dropRateLimited.Load())
	}
}

// Reply bytes to an address never exceed ratio × the search bytes whose
// replies go there, whoever sent them: a spoofed reply address gets at
// most ratio × the attacker's own bytes. Discovery answers count too.
func TestUDPReflectionCap(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	out := &recSender{}
	const ratio = 1.5
	h, st := testHandler(t, Options{AnswerNames: true, Resolver: threeServers(), Clock: clk, GUID: ownGUID, TCPPort: 5075,
		ReflectionRatio: ratio, ReflectionWindow: 10 * time.Second}, out)
	// Sent by lanC1, replies to the victim.
	msg := searchMsg(0, victim, 40000, []string{"tcp"}, "a", "b", "c")
	sent := 0
	for i := range 10 {
		h.handle(broadcastFrom(msg, lanC1))
		sent += len(msg)
		_, got := repliesTo(out, victim)
		if float64(got) > ratio*float64(sent) {
			t.Fatalf("after %d searches: %d reply bytes for %d received", i+1, got, sent)
		}
	}
	n, got := repliesTo(out, victim)
	if n == 0 || n == 30 || float64(got) < ratio*float64(sent)-float64(len(out.replies[0].b)) {
		t.Fatalf("%d replies, %d bytes for %d received: the cap should bind but not starve", n, got, sent)
	}
	if st.reflectionCapped.Load() != uint64(30-n) {
		t.Fatalf("capped %d, want %d", st.reflectionCapped.Load(), 30-n)
	}
	// A new window does not inherit the old credit.
	clk.Advance(10 * time.Second)
	out.reset()
	h.handle(broadcastFrom(searchMsg(0, victim, 40000, []string{"tcp"}, "a", "b", "c", "x", "y", "z"), lanC1))
	if len(out.replies) != 2 {
		t.Fatalf("fresh window: %d replies, want 2 (one search's worth)", len(out.replies))
	}

	// A discovery ping (37 bytes) is worth a 53-byte answer at ratio 1.5,
	// not at ratio 1.
	ping := searchMsg(pva.SearchMustReply, netip.Addr{}, 40000, nil)
	for _, c := range []struct {
		ratio float64
		want  int
	}{{1, 0}, {1.5, 1}} {
		out := &recSender{}
		h, _ := testHandler(t, Options{GUID: ownGUID, TCPPort: 5075, ReflectionRatio: c.ratio}, out)
		h.handle(broadcastFrom(ping, lanC2))
		if len(out.replies) != c.want {
			t.Errorf("ratio %v: %d discovery answers, want %d", c.ratio, len(out.replies), c.want)
		}
	}
}

// Exempt addresses are neither limited nor capped.
func TestUDPLimitExempt(t *testing.T) {
	out := &recSender{}
	h, _ := testHandler(t, Options{AnswerNames: true, Resolver: threeServers(), Clock: clock.NewFake(time.Time{}),
		SearchRate: 1, SearchBurst: 1, ReflectionRatio: 0.1,
		LimitExempt: []netip.Prefix{netip.MustParsePrefix("10.0.0.9/32")}}, out)
	msg := searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "a", "b", "c")
	for range 5 {
		h.handle(broadcastFrom(msg, lanC1))
		h.handle(broadcastFrom(msg, lanC2))
	}
	if n, _ := repliesTo(out, lanC1.Addr()); n != 15 {
		t.Fatalf("exempt client: %d replies, want 15", n)
	}
	if n, _ := repliesTo(out, lanC2.Addr()); n != 0 {
		t.Fatalf("other client: %d replies, want 0 (ratio 0.1)", n)
	}
}

// Names beyond MaxNamesPerSearch are not looked up.
func TestUDPNamesPerSearchBound(t *testing.T) {
	out := &recSender{}
	h, st := testHandler(t, Options{AnswerNames: true, Resolver: threeServers(), MaxNamesPerSearch: 2}, out)
	h.handle(broadcastFrom(searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "a", "b", "c", "d"), lanC1))
	if len(out.replies) != 2 || st.namesDropped.Load() != 2 || st.searchNames.Load() != 2 {
		t.Fatalf("%d replies, stats %+v", len(out.replies), metrics.Sprint(st))
	}
}

// The search path with every limit and the access check on (the daemon's
// defaults), from a few hundred sources, allocates nothing per datagram.
func BenchmarkHandleWithLimits(b *testing.B) {
	out := &discardSender{}
	h, _ := testHandler(b, Options{AnswerNames: true, Resolver: threeServers(), GUID: ownGUID, TCPPort: 5075,
		SearchRate: 1e9, SearchBurst: 1 << 30, ReflectionRatio: 1000, ReflectionWindow: time.Hour,
		ClientAllowed: func(a netip.Addr) bool { return a != victim }}, out)
	msg := searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "a", "b", "nobody")
	ds := make([]datagram, 256)
	for i := range ds {
		ds[i] = *broadcastFrom(msg, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 40000))
		h.handle(&ds[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		h.handle(&ds[i&255])
		i++
	}
	if out.replies == 0 {
		b.Fatal("nothing answered")
	}
}
