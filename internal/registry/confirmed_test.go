package registry

import (
	"path/filepath"
	"testing"
	"time"
)

// A server that lists nothing (the Phoebus Java server: no `server` PV),
// loaded from a snapshot, is confirmed by a name confirmed over TCP
// (AddNames, after a TCP search answered under its GUID) and is not
// expired at snapshot.unverified_window while it answers.
func TestConfirmedNamesVerifySnapshotServer(t *testing.T) {
	r, fc := newTest(t, Options{UnverifiedTTL: time.Minute})
	mustUpsert(t, r, 1)
	if err := r.AddNames(guid(1), []string{"java:a"}, SourceSearchThrough); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s")
	if err := r.SaveSnapshot(path); err != nil {
		t.Fatal(err)
	}
	r2, fc2 := newTest(t, Options{UnverifiedTTL: time.Minute})
	fc2.Set(fc.Now())
	if err := r2.LoadSnapshot(path); err != nil {
		t.Fatal(err)
	}
	if c := r2.Counts(); c.Unverified != 1 {
		t.Fatalf("counts %+v", c)
	}
	fc2.Advance(10 * time.Second)
	if err := r2.AddNames(guid(1), []string{"java:a"}, SourceSearchThrough); err != nil {
		t.Fatal(err)
	}
	if c := r2.Counts(); c.Unverified != 0 {
		t.Fatalf("a TCP-confirmed name left its server unverified: %+v", c)
	}
	fc2.Advance(time.Hour)
	if g, _ := holderOf(t, r2, "java:a"); g != guid(1) {
		t.Fatal("a server confirmed over TCP expired as unconfirmed")
	}
}
