package probe

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/testutil"
)

type schedReq struct{ got chan func() }

func schedStart(s *sched, ctx context.Context, host string, retry bool) schedReq {
	r := schedReq{make(chan func(), 1)}
	go func() {
		if rel, ok := s.acquire(ctx, netip.MustParseAddr(host), retry); ok {
			r.got <- rel
		} else {
			close(r.got)
		}
	}()
	return r
}

func (r schedReq) granted(t *testing.T) func() {
	t.Helper()
	select {
	case rel := <-r.got:
		return rel
	case <-time.After(5 * time.Second):
		t.Fatal("not granted")
	}
	return nil
}

func waitWaiting(t *testing.T, s *sched, n int) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, "waiters", func() bool { return s.stats().waiting == n })
}

// The pool's rules, a grant at a time: a host holds at most its share,
// fresh probes go before retries, retries hold at most half the pool, a
// cancelled waiter leaves nothing behind.
func TestSchedShares(t *testing.T) {
	s := newSched(4, 2)
	bg := context.Background()
	a1 := schedStart(s, bg, "10.0.0.1", false).granted(t)
	_ = schedStart(s, bg, "10.0.0.1", false).granted(t)
	a3 := schedStart(s, bg, "10.0.0.1", false)
	waitWaiting(t, s, 1)
	if n := s.throttled.Load(); n != 1 {
		t.Fatalf("throttled %d, want 1 (a at its share, slots free)", n)
	}
	b1 := schedStart(s, bg, "10.0.0.2", false).granted(t)
	b2 := schedStart(s, bg, "10.0.0.2", true).granted(t) // pool now full
	b3 := schedStart(s, bg, "10.0.0.2", false)
	waitWaiting(t, s, 2)
	c1 := schedStart(s, bg, "10.0.0.3", true)
	waitWaiting(t, s, 3)
	b2() // the slot goes to b's fresh probe: a is at its share, c is a retry
	b3.granted(t)
	waitWaiting(t, s, 2)
	a1() // a's fresh probe before c's retry
	a3.granted(t)
	waitWaiting(t, s, 1)
	b1()
	c1.granted(t)

	ctx, cancel := context.WithCancel(bg)
	e := schedStart(s, ctx, "10.0.0.6", false)
	waitWaiting(t, s, 1)
	cancel()
	if _, ok := <-e.got; ok {
		t.Fatal("granted after cancel")
	}
	waitWaiting(t, s, 0)
}

// Retries hold at most half the pool, even with slots free.
func TestSchedRetriesHalfThePool(t *testing.T) {
	s := newSched(4, 4)
	bg := context.Background()
	r1 := schedStart(s, bg, "10.0.1.1", true).granted(t)
	schedStart(s, bg, "10.0.1.2", true).granted(t)
	r3 := schedStart(s, bg, "10.0.1.3", true)
	waitWaiting(t, s, 1)
	schedStart(s, bg, "10.0.1.4", false).granted(t) // fresh: a free slot
	select {
	case <-r3.got:
		t.Fatal("a third retry ran in a pool of 4")
	case <-time.After(20 * time.Millisecond):
	}
	r1()
	r3.granted(t)
}
