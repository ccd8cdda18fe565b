package registry

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestSnapshotNewerFormatRefused: a snapshot whose format version is newer
// than this build's (a newer pvans wrote it, then was rolled back) is
// refused with an error naming both format versions, and nothing of it is
// loaded; the layout after the version is unknown, so no guess is made.
func TestSnapshotNewerFormatRefused(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "registry-v1.snap"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		version uint32
		want    []string
	}{
		{snapVersion + 1, []string{fmt.Sprintf("format version %d was written by a newer pvans", snapVersion+1), fmt.Sprintf("reads format versions up to %d", snapVersion)}},
		{0, []string{"format version 0 does not exist"}},
	} {
		b := slices.Clone(data)
		binary.LittleEndian.PutUint32(b[len(snapMagic):], c.version)
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
		path := filepath.Join(t.TempDir(), "registry.snap")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r, _ := newTest(t, Options{})
		err := r.LoadSnapshot(path)
		if !errors.Is(err, ErrSnapshot) {
			t.Fatalf("version %d: err = %v, want ErrSnapshot", c.version, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("version %d: error %q does not say %q", c.version, err, w)
			}
		}
		if n := r.Counts(); n.Servers != 0 || n.Names != 0 {
			t.Errorf("version %d: %d servers, %d names loaded from a refused snapshot", c.version, n.Servers, n.Names)
		}
	}
}

// TestSnapshotEveryFormatKept: each format version up to this build's has
// its fixture in testdata, written by the release that wrote that format,
// and loads; a format change therefore comes with the new version's file
// and keeps the old ones (docs/upgrading.md).
func TestSnapshotEveryFormatKept(t *testing.T) {
	for v := 1; v <= snapVersion; v++ {
		r, _ := newTest(t, Options{})
		if err := r.LoadSnapshot(filepath.Join("testdata", fmt.Sprintf("registry-v%d.snap", v))); err != nil {
			t.Errorf("format %d: %v", v, err)
		} else if r.Counts().Servers == 0 {
			t.Errorf("format %d: fixture loaded no server", v)
		}
	}
}
