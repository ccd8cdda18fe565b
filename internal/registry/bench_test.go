package registry

import (
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
)

// Site scale from the issue: 1,000,000 names of mean length 30 over 1,000
// servers.
const (
	benchServers        = 1000
	benchNamesPerServer = 1000
)

// siteNames returns per-server name sets: "S0042:D0123:" plus 6..30
// random upper-case letters (mean length 30).
func siteNames(seed uint64) [][]string {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([][]string, benchServers)
	buf := make([]byte, 0, 64)
	for s := range out {
		out[s] = make([]string, benchNamesPerServer)
		for i := range out[s] {
			buf = append(buf[:0], 'S')
			buf = appendNum(buf, s, 4)
			buf = append(buf, ":D"...)
			buf = appendNum(buf, i, 4)
			buf = append(buf, ':')
			for n := 6 + rng.IntN(25); n > 0; n-- {
				buf = append(buf, byte('A'+rng.IntN(26)))
			}
			out[s][i] = string(buf)
		}
	}
	return out
}

func appendNum(b []byte, v, w int) []byte {
	for d := w - 1; d >= 0; d-- {
		p := 1
		for range d {
			p *= 10
		}
		b = append(b, byte('0'+v/p%10))
	}
	return b
}

func loadSite(tb testing.TB, names [][]string) *Registry {
	r := New(Options{Clock: clock.NewFake(time.Time{})})
	for s := range names {
		if _, err := r.UpsertServer(ServerInfo{GUID: guid(s + 1), Addr: addr(s + 1)}); err != nil {
			tb.Fatal(err)
		}
		if err := r.ReplaceNames(guid(s+1), names[s], SourceProbe); err != nil {
			tb.Fatal(err)
		}
	}
	return r
}

var site struct {
	once  sync.Once
	r     *Registry
	names [][]string
}

func benchSite(b *testing.B) (*Registry, [][]string) {
	site.once.Do(func() {
		site.names = siteNames(1)
		site.r = loadSite(b, site.names)
	})
	return site.r, site.names
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkHeapPerName reports the registry's heap per name, the name
// strings included (the registry keeps them).
func BenchmarkHeapPerName(b *testing.B) {
	for b.Loop() {
		before := heapInUse()
		names := siteNames(2)
		r := loadSite(b, names)
		names = nil
		after := heapInUse()
		b.ReportMetric(float64(after-before)/float64(benchServers*benchNamesPerServer), "heapB/name")
		runtime.KeepAlive(r)
	}
}

// BenchmarkLoad1M is the full load of 1M names by 1,000 probe results.
func BenchmarkLoad1M(b *testing.B) {
	names := siteNames(3)
	b.ReportAllocs()
	for b.Loop() {
		loadSite(b, names)
	}
}

// BenchmarkLoadSnapshot1M is a restart: 1M names from a snapshot file.
func BenchmarkLoadSnapshot1M(b *testing.B) {
	r, _ := benchSite(b)
	path := filepath.Join(b.TempDir(), "snap")
	if err := r.SaveSnapshot(path); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r2 := New(Options{})
		if err := r2.LoadSnapshot(path); err != nil {
			b.Fatal(err)
		}
		r2.Close()
	}
}

func BenchmarkSaveSnapshot1M(b *testing.B) {
	r, _ := benchSite(b)
	path := filepath.Join(b.TempDir(), "snap")
	for b.Loop() {
		if err := r.SaveSnapshot(path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplace1000 replaces one server's 1,000-name set at 1M names:
// "same" is a re-probe that finds nothing new, "disjoint" swaps every name.
func BenchmarkReplace1000(b *testing.B) {
	r, names := benchSite(b)
	g := guid(500)
	alt := make([]string, benchNamesPerServer)
	for i, n := range names[499] {
		alt[i] = n + ":ALT"
	}
	b.Run("same", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.ReplaceNames(g, names[499], SourceProbe)
		}
	})
	b.Run("disjoint", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			set := alt
			if i%2 == 1 {
				set = names[499]
			}
			i++
			r.ReplaceNames(g, set, SourceProbe)
		}
		r.ReplaceNames(g, names[499], SourceProbe)
	})
}

func batches(names [][]string, miss bool) [][]pva.SearchName {
	rng := rand.New(rand.NewPCG(7, 7))
	out := make([][]pva.SearchName, 1024)
	for i := range out {
		q := make([]pva.SearchName, 38)
		for j := range q {
			n := names[rng.IntN(len(names))][rng.IntN(benchNamesPerServer)]
			if miss {
				n = "X" + n[1:]
			}
			q[j] = pva.SearchName{CID: uint32(j), Name: []byte(n)}
		}
		out[i] = q
	}
	return out
}

func benchLookup(b *testing.B, miss bool) {
	r, names := benchSite(b)
	qs := batches(names, miss)
	out := make([]*Holder, 38)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.LookupBatch(qs[i%len(qs)], out)
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*38), "ns/name")
}

// BenchmarkLookupBatch38 is the registry half of the search hot path: one
// read lock, 38 random names at 1M.
func BenchmarkLookupBatch38(b *testing.B)     { benchLookup(b, false) }
func BenchmarkLookupBatch38Miss(b *testing.B) { benchLookup(b, true) }

// BenchmarkPlainMapBaseline is the floor the index is measured against: a
// bare map[string]uint32 of the same 1M names, same batches, no lock. On a
// loaded machine compare ratios, not absolute figures.
func BenchmarkPlainMapBaseline(b *testing.B) {
	_, names := benchSite(b)
	m := make(map[string]uint32)
	for s := range names {
		for _, n := range names[s] {
			m[n] = uint32(s)
		}
	}
	for _, miss := range []bool{false, true} {
		name := "hit"
		if miss {
			name = "miss"
		}
		b.Run(name, func(b *testing.B) {
			qs := batches(names, miss)
			var sink uint32
			i := 0
			for b.Loop() {
				for _, q := range qs[i%len(qs)] {
					sink += m[string(q.Name)]
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*38), "ns/name")
			_ = sink
		})
	}
}

// BenchmarkIndexRebuild1M is the writer's pause when the index grows or
// shrinks at the 1M site (readers keep using the old table meanwhile).
func BenchmarkIndexRebuild1M(b *testing.B) {
	r, _ := benchSite(b)
	r.wmu.Lock()
	defer r.wmu.Unlock()
	for b.Loop() {
		tags, _, _, _ := r.idx.rebuilt(r.idx.count)
		runtime.KeepAlive(tags)
	}
}
