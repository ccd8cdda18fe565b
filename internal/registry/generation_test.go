package registry

import (
	"sync/atomic"
	"testing"
)

// The answerable set's generation (what pvans's own beacons report as
// their change count) moves when a name becomes answerable, stops being
// answerable or passes to another server, and only then.
func TestNameGenerationFollowsAnswerableSet(t *testing.T) {
	r, _ := newTest(t, Options{})
	var told atomic.Int64
	r.SubscribeChanges(func() { told.Add(1) })
	mustUpsert(t, r, 1)
	mustUpsert(t, r, 2)
	step := func(what string, moved bool, f func() error) {
		t.Helper()
		g, n := r.gen.Load(), told.Load()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := r.gen.Load() != g; got != moved {
			t.Fatalf("%s: generation moved=%v, want %v", what, got, moved)
		}
		if got := told.Load() != n; got != moved {
			t.Fatalf("%s: subscribers told=%v, want %v", what, got, moved)
		}
	}
	step("first listing", true, func() error { return r.ReplaceNames(guid(1), []string{"a", "b"}, SourceProbe) })
	step("same listing again", false, func() error { return r.ReplaceNames(guid(1), []string{"b", "a"}, SourceProbe) })
	step("duplicate claim (first claim kept)", false, func() error { return r.AddNames(guid(2), []string{"a"}, SourceSearchThrough) })
	step("name already held, added again", false, func() error { return r.AddNames(guid(1), []string{"b"}, SourceSearchThrough) })
	step("a name goes", true, func() error { return r.ReplaceNames(guid(1), []string{"a"}, SourceProbe) })
	step("holder removed, duplicate takes over", true, func() error { return r.RemoveServer(guid(1)) })
	step("new name", true, func() error { return r.AddNames(guid(2), []string{"c"}, SourceSearchThrough) })
	step("last server removed", true, func() error { return r.RemoveServer(guid(2)) })
}
