package registry

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// Apply: a raised server bound admits more at once; a lowered one
// removes nothing and refuses new servers until the count falls below it.
func TestApplyRaiseNowLowerAtEviction(t *testing.T) {
	r := New(Options{MaxServers: 2})
	mustUpsert(t, r, 1)
	mustUpsert(t, r, 2)
	if _, err := r.UpsertServer(ServerInfo{GUID: guid(3), Addr: addr(3)}); !errors.Is(err, ErrServerLimit) {
		t.Fatalf("third server at bound 2: %v", err)
	}
	r.Apply(Limits{MaxServers: 4})
	mustUpsert(t, r, 3)
	mustUpsert(t, r, 4)

	r.Apply(Limits{MaxServers: 2})
	if n := r.Counts().Servers; n != 4 {
		t.Fatalf("lowering the bound removed servers: %d left", n)
	}
	if _, err := r.UpsertServer(ServerInfo{GUID: guid(5), Addr: addr(5)}); !errors.Is(err, ErrServerLimit) {
		t.Fatalf("new server above a lowered bound: %v", err)
	}
	for _, i := range []int{1, 2, 3} {
		_ = r.RemoveServer(guid(i))
	}
	mustUpsert(t, r, 5) // 1 left: below the bound again
	if _, err := r.UpsertServer(ServerInfo{GUID: guid(6), Addr: addr(6)}); !errors.Is(err, ErrServerLimit) {
		t.Fatalf("bound 2 with 2 servers: %v", err)
	}
}

func TestApplyFieldNames(t *testing.T) {
	r := New(Options{FieldNames: true})
	mustUpsert(t, r, 1)
	if err := r.ReplaceNames(guid(1), []string{"rec"}, SourceProbe); err != nil {
		t.Fatal(err)
	}
	if h, _ := r.LookupName("rec.VAL"); h == nil {
		t.Fatal("field name not answered with the rule on")
	}
	r.Apply(Limits{FieldNames: false})
	if h, _ := r.LookupName("rec.VAL"); h != nil {
		t.Fatal("field name answered after the rule was turned off")
	}
}

// Zero Options are no bound: the daemon passes its settings through Apply,
// and a registry nobody gave a bound keeps what it is told, and keeps
// snapshot servers until they are confirmed or lost, until Apply gives it
// an unverified window, which runs from the load.
func TestZeroOptionsAreNoBound(t *testing.T) {
	r, fc := newTest(t, Options{})
	for i := 1; i <= 3; i++ {
		mustUpsert(t, r, i)
		if err := r.ReplaceNames(guid(i), []string{fmt.Sprint("n", i), "shared"}, SourceProbe); err != nil {
			t.Fatal(err)
		}
	}
	if c := r.Counts(); c.Servers != 3 {
		t.Fatalf("counts %+v", c)
	}
	path := filepath.Join(t.TempDir(), "s")
	if err := r.SaveSnapshot(path); err != nil {
		t.Fatal(err)
	}
	r2, fc2 := newTest(t, Options{})
	fc2.Set(fc.Now())
	if err := r2.LoadSnapshot(path); err != nil {
		t.Fatal(err)
	}
	fc2.Advance(24 * time.Hour)
	if c := r2.Counts(); c.Servers != 3 || c.Unverified != 3 {
		t.Fatalf("unconfirmed snapshot servers dropped without an unverified window: %+v", c)
	}
	r2.Apply(Limits{UnverifiedTTL: time.Hour})
	fc2.Advance(time.Millisecond)
	if c := r2.Counts(); c.Servers != 0 {
		t.Fatalf("an unverified window applied after the load did not run from the load: %+v", c)
	}
}
