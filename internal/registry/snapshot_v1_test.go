package registry

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestSnapshotV1Loads loads testdata/registry-v1.snap, written by the
// registry before go-memdb became its one store of servers and claims (the
// GUID map and the hex-string keys): the file format is unchanged, so the
// same servers, names, holders, learned sources and duplicate claims come
// back, and a snapshot of the loaded registry loads to the same again.
func TestSnapshotV1Loads(t *testing.T) {
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // the file's times are seconds after it
	check := func(t *testing.T, r *Registry) {
		t.Helper()
		v := r.View()
		checkView(t, v)
		var got []string
		for _, s := range v.Servers {
			listed := -1
			if !s.ListedAt.IsZero() {
				listed = int(s.ListedAt.Sub(epoch) / time.Second)
			}
			got = append(got, fmt.Sprintf("%v %v names=%d held=%d first=%d listed=%s@%d verified=%v",
				s.GUID, s.Addr, s.Names, s.Held, s.FirstSeen.Sub(epoch)/time.Second, s.ListedHow, listed, s.Verified))
		}
		want := []string{
			"a00000000000000000000001 127.0.0.1:5075 names=4 held=4 first=0 listed=probe@3 verified=false",
			"a00000000000000000000002 127.0.0.2:5075 names=2 held=1 first=1 listed=probe@4 verified=false",
			"a00000000000000000000003 127.0.0.3:5075 names=2 held=1 first=2 listed=unknown@-1 verified=false",
		}
		same(t, "servers", got, want)
		got = nil
		for _, n := range listNames(r, "", 0) {
			got = append(got, fmt.Sprintf("%s %v %s@%d dups=%d", n.Name, n.GUID, n.How, n.At.Sub(epoch)/time.Second, n.Claimant))
		}
		want = []string{
			"a a00000000000000000000001 probe@3 dups=0",
			"b a00000000000000000000001 search-through@6 dups=0",
			"c a00000000000000000000002 probe@4 dups=0",
			"dup a00000000000000000000001 probe@3 dups=2",
			"rec a00000000000000000000001 probe@3 dups=0",
			"st a00000000000000000000003 static@6 dups=0",
		}
		same(t, "names", got, want)
		got = nil
		for _, d := range v.Duplicates {
			got = append(got, fmt.Sprintf("%s %v>%v", d.Name, d.Holder, d.Claimant))
		}
		same(t, "duplicates", got, []string{"dup a00000000000000000000001>a00000000000000000000002", "dup a00000000000000000000001>a00000000000000000000003"})
	}
	r, _ := newTest(t, Options{})
	if err := r.LoadSnapshot(filepath.Join("testdata", "registry-v1.snap")); err != nil {
		t.Fatal(err)
	}
	check(t, r)
	path := filepath.Join(t.TempDir(), "again.snap")
	if err := r.SaveSnapshot(path); err != nil {
		t.Fatal(err)
	}
	r2, _ := newTest(t, Options{})
	if err := r2.LoadSnapshot(path); err != nil {
		t.Fatal(err)
	}
	check(t, r2)
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n%v\nwant\n%v", what, got, want)
	}
}
