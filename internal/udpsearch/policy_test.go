package udpsearch

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
)

// Apply (a configuration reload) takes effect from the next datagram:
// client access list, search rate, exemption, ignore list and answering.
func TestApplyPolicyToNextDatagram(t *testing.T) {
	out := &recSender{}
	clk := clock.NewFake(time.Time{})
	s := New(Options{AnswerNames: true, Resolver: captureRegistry(), Clock: clk})
	s.ifs.Store(newIfaceTable(testInterfaces()))
	s.fam[ip4].h.out = out
	msg := searchMsg(pva.SearchMustReply, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1")
	answered := func() int {
		out.reset()
		s.fam[ip4].h.handle(broadcastFrom(msg, lanC1))
		n, _ := repliesTo(out, lanC1.Addr())
		return n
	}
	if answered() != 1 {
		t.Fatal("not answered before the reload")
	}
	base := Policy{AnswerNames: true}

	deny := base
	deny.ClientAllowed = func(a netip.Addr) bool { return a != lanC1.Addr() }
	s.Apply(deny)
	if answered() != 0 {
		t.Fatal("client denied by Apply answered")
	}

	limited := base
	limited.SearchRate, limited.SearchBurst = 1, 2
	s.Apply(limited)
	n := 0
	for range 10 {
		n += answered()
	}
	if n != 2 {
		t.Fatalf("after lowering the rate: %d of 10 answered, want the burst of 2", n)
	}
	s.Apply(limited) // unchanged limits: the same limiter, still empty
	if answered() != 0 {
		t.Fatal("re-applying the same rate refilled the bucket")
	}
	exempt := limited
	exempt.LimitExempt = []netip.Prefix{netip.PrefixFrom(lanC1.Addr(), 32)}
	s.Apply(exempt)
	if answered() != 1 {
		t.Fatal("source exempted by Apply still limited")
	}

	ignore := base
	ignore.IgnoreAddrs = []netip.AddrPort{netip.AddrPortFrom(lanC1.Addr(), 0)}
	s.Apply(ignore)
	if answered() != 0 {
		t.Fatal("source in the new ignore list answered")
	}
	quiet := base
	quiet.AnswerNames = false
	s.Apply(quiet)
	out.reset()
	s.fam[ip4].h.handle(broadcastFrom(msg, lanC1))
	for _, r := range out.replies {
		if _, m := decodeResponse(t, r.b); m.Found {
			t.Fatal("names answered after answer_searches was turned off")
		}
	}
}
