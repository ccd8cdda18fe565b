package registry

import (
	"context"
	"errors"
	"testing"
	"time"
)

// checkView checks that a view adds up: its counts are those of its rows,
// and every duplicate claim names servers of the same view.
func checkView(t interface {
	Helper()
	Fatalf(string, ...any)
}, v View) {
	t.Helper()
	c := Counts{Servers: len(v.Servers), Duplicates: len(v.Duplicates)}
	known := map[[12]byte]bool{}
	for _, s := range v.Servers {
		known[s.GUID] = true
		c.Names += s.Held
		c.Claims += s.Names
		if !s.Verified {
			c.Unverified++
		}
	}
	names := map[string]bool{}
	for _, d := range v.Duplicates {
		names[d.Name] = true
		if !known[d.Holder] || !known[d.Claimant] || !d.HolderAddr.IsValid() || !d.ClaimantAddr.IsValid() {
			t.Fatalf("revision %d: duplicate %+v names a server not in the view", v.Revision, d)
		}
	}
	c.DuplicateNames = len(names)
	if c != v.Counts {
		t.Fatalf("revision %d: counts %+v, rows add up to %+v", v.Revision, v.Counts, c)
	}
}

func fired(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestViewWatch: a view's Changed channel (and Revision's) is closed by a
// commit that changes servers or duplicate claims, and by nothing else —
// refused hints, lookups, listings, operations on unknown servers and
// re-learning a name already claimed leave it open.
func TestViewWatch(t *testing.T) {
	r, fc := newTest(t, Options{})
	step := func(what string, change bool, f func() error) {
		t.Helper()
		before := r.View()
		checkView(t, before)
		rev, ch := r.Revision()
		if rev != before.Revision {
			t.Fatalf("%s: Revision() %d, View().Revision %d", what, rev, before.Revision)
		}
		err := f()
		if err != nil && change {
			t.Fatalf("%s: %v", what, err)
		}
		after := r.View()
		checkView(t, after)
		if got := fired(before.Changed); got != change {
			t.Fatalf("%s: view watch fired=%v, want %v", what, got, change)
		}
		if got := fired(ch); got != change {
			t.Fatalf("%s: revision watch fired=%v, want %v", what, got, change)
		}
		if moved := after.Revision != before.Revision; moved != change {
			t.Fatalf("%s: revision %d -> %d, want moved=%v", what, before.Revision, after.Revision, change)
		}
		if fired(after.Changed) {
			t.Fatalf("%s: the new view's watch is already closed", what)
		}
		fc.Advance(time.Second)
	}
	step("new server", true, func() error { mustUpsert(t, r, 1); return nil })
	step("unknown GUID at a held endpoint (a hint, refused)", false, func() error {
		_, err := r.UpsertServer(ServerInfo{GUID: guid(9), Addr: addr(1)})
		if !errors.Is(err, ErrEndpointHeld) {
			t.Fatalf("hint at a held endpoint: %v", err)
		}
		return err
	})
	step("names listed", true, func() error { return r.ReplaceNames(guid(1), []string{"a", "b"}, SourceProbe) })
	step("lookups and a listing", false, func() error {
		r.LookupName("a")
		_, err := r.NamesContext(context.Background(), "", 0)
		return err
	})
	step("a name it claims learned again", false, func() error { return r.AddNames(guid(1), []string{"a"}, SourceSearchThrough) })
	step("unknown server", false, func() error {
		if r.RemoveServer(guid(7)) == nil || r.SetProbeState(guid(7), ProbeListed, nil) == nil || r.AddNames(guid(7), []string{"x"}, SourceProbe) == nil {
			t.Fatal("an unknown server was changed")
		}
		return nil
	})
	step("nothing unverified to expire", false, func() error { r.expireUnverified(fc.Now().Add(time.Hour)); return nil })
	step("second server", true, func() error { mustUpsert(t, r, 2); return nil })
	step("duplicate claim", true, func() error { return r.AddNames(guid(2), []string{"a"}, SourceSearchThrough) })
	step("probe state", true, func() error { return r.SetProbeState(guid(2), ProbeFailed, errors.New("refused")) })
	step("holder removed, the duplicate takes over", true, func() error { return r.RemoveServer(guid(1)) })
	v := r.View()
	if len(v.Servers) != 1 || len(v.Duplicates) != 0 || v.Counts.Names != 1 {
		t.Fatalf("after takeover: %+v", v)
	}
	if h, _ := r.LookupName("a"); h == nil || h.GUID != guid(2) {
		t.Fatalf("a held by %v after takeover", h)
	}
}

// TestRevisionWakesWaiter: a reader blocked on the revision's channel
// wakes when another goroutine's commit changes the servers.
func TestRevisionWakesWaiter(t *testing.T) {
	r, _ := newTest(t, Options{})
	rev, ch := r.Revision()
	go r.UpsertServer(ServerInfo{GUID: guid(1), Addr: addr(1)})
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken by a new server")
	}
	if now, _ := r.Revision(); now == rev {
		t.Fatalf("woken, but the revision is still %d", rev)
	}
}

// TestRevisionNotRepeatedByARestart: a registry made later (a restarted
// daemon) starts above the revisions an earlier one reached, so a client
// holding a revision of the last run is answered at once by GET
// /v1/changes instead of waiting for a change it would take as the first.
func TestRevisionNotRepeatedByARestart(t *testing.T) {
	r1, fc := newTest(t, Options{})
	for i := 1; i <= 5; i++ {
		mustUpsert(t, r1, i)
	}
	last, _ := r1.Revision()
	fc.Advance(time.Millisecond) // the restart, a millisecond later
	r2 := New(Options{Clock: fc})
	if first, _ := r2.Revision(); first <= last {
		t.Fatalf("a registry made after another reached revision %d starts at %d", last, first)
	}
}
