package registry

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
)

// TestNamesListingHoldsNoLock is the registry half of the issue-14 row
// "GET /v1/names with a 1 MB glob held the registry's writer lock 23.7 s":
// while a listing of a million names runs, writers (a beacon's upsert, a
// listing) and readers (a search's lookup) keep finishing while it runs.
// Counted, not timed: a writer that waited for the lock would finish
// only once each listing call ended, at most one per call (six), where
// one that takes no wait finishes hundreds.
func TestNamesListingHoldsNoLock(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 1M-name registry")
	}
	names := siteNames(7)
	r := loadSite(t, names)
	if c := r.Counts(); c.Names < 1_000_000 {
		t.Fatalf("registry holds %d names, want 1M", c.Names)
	}
	// A glob that matches nothing yet makes every name cost a full match.
	pattern := strings.Repeat("*A", 60) + "*Z?Z?Z?Z"
	done := make(chan time.Duration)
	go func() {
		start := time.Now()
		for i := 0; i < 3; i++ {
			listNames(r, pattern, 10)
			listNames(r, "", 10000)
		}
		done <- time.Since(start)
	}()
	var lat []time.Duration
	ops := 0
	q := []pva.SearchName{{CID: 1, Name: []byte(names[3][5])}}
	out := make([]*Holder, 1)
	for listing := true; listing; ops++ {
		select {
		case d := <-done:
			t.Logf("listings took %v", d)
			listing = false
		default:
		}
		start := time.Now()
		if _, err := r.UpsertServer(ServerInfo{GUID: guid(9999), Addr: addr(9999)}); err != nil {
			t.Fatal(err)
		}
		r.LookupBatch(q, out)
		if out[0] == nil {
			t.Fatal("lookup lost a held name")
		}
		lat = append(lat, time.Since(start))
		time.Sleep(time.Millisecond)
	}
	slices.Sort(lat)
	p95, worst := lat[len(lat)*95/100], lat[len(lat)-1]
	t.Logf("%d upsert+lookup during the listings, p95 %v, worst %v", ops, p95, worst)
	if ops < 4*6 {
		t.Fatalf("%d upsert+lookup finished during six listing calls (p95 %v, worst %v); want many: they waited for the listing", ops, p95, worst)
	}
}

// TestNamesContextResults: the chunked listing is exact on a quiet
// registry, honours limit and the prefix/glob rules, and stops with ctx.
func TestNamesContextResults(t *testing.T) {
	r := New(Options{})
	if _, err := r.UpsertServer(ServerInfo{GUID: guid(1), Addr: addr(1)}); err != nil {
		t.Fatal(err)
	}
	var all []string
	for i := 0; i < 3*namesScanChunk; i++ {
		all = append(all, "pv:"+string(rune('a'+i%26))+":"+strings.Repeat("x", i%7)+string(rune('0'+i%10))+"-"+itoa(i))
	}
	if err := r.ReplaceNames(guid(1), all, SourceProbe); err != nil {
		t.Fatal(err)
	}
	slices.Sort(all)
	got := listNames(r, "", 0)
	if len(got) != len(all) {
		t.Fatalf("listed %d of %d", len(got), len(all))
	}
	for i := range got {
		if got[i].Name != all[i] || got[i].GUID != guid(1) {
			t.Fatalf("entry %d = %+v, want %s", i, got[i], all[i])
		}
	}
	if got := listNames(r, "pv:b", 5); len(got) != 5 || got[0].Name != all[slices.IndexFunc(all, func(s string) bool { return strings.HasPrefix(s, "pv:b") })] {
		t.Fatalf("prefix+limit: %+v", got)
	}
	if got := listNames(r, "*-1?", 0); len(got) != 10 {
		t.Fatalf("glob *-1? matched %d, want 10", len(got))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.NamesContext(ctx, "*", 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled listing returned %v", err)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
