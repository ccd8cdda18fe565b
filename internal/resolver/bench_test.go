package resolver

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

// The site: 1,000,000 names of mean length 30 over 1,000 servers.
var site struct {
	once  sync.Once
	res   *Resolver
	names [][]string
}

func benchSite(b *testing.B) (*Resolver, [][]string) {
	site.once.Do(func() {
		rng := rand.New(rand.NewPCG(1, 1))
		reg := registry.New(registry.Options{FieldNames: true})
		site.names = make([][]string, 1000)
		letters := make([]byte, 32)
		for s := range site.names {
			var g pva.GUID
			g[10], g[11] = byte((s+1)>>8), byte(s+1)
			if _, err := reg.UpsertServer(registry.ServerInfo{GUID: g, Addr: netip.AddrPortFrom(addr(s%250+1).Addr(), uint16(5075+s))}); err != nil {
				b.Fatal(err)
			}
			site.names[s] = make([]string, 1000)
			for i := range site.names[s] {
				n := 6 + rng.IntN(25)
				for j := range n {
					letters[j] = byte('A' + rng.IntN(26))
				}
				site.names[s][i] = fmt.Sprintf("S%04d:D%04d:%s", s, i, letters[:n])
			}
			if err := reg.ReplaceNames(g, site.names[s], registry.SourceProbe); err != nil {
				b.Fatal(err)
			}
		}
		site.res = New(reg, Options{})
	})
	return site.res, site.names
}

func benchLookup(b *testing.B, miss bool) {
	r, names := benchSite(b)
	rng := rand.New(rand.NewPCG(7, 7))
	qs := make([][]pva.SearchName, 1024)
	for i := range qs {
		qs[i] = make([]pva.SearchName, 38)
		for j := range qs[i] {
			n := names[rng.IntN(len(names))][rng.IntN(1000)]
			if miss {
				n = "X" + n[1:] + ".VAL" // a miss that also tries the field rule
			}
			qs[i][j] = pva.SearchName{CID: 0x12345678 + uint32(j), Name: []byte(n)}
		}
	}
	var batch Batch
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Lookup(qs[i%len(qs)], &batch)
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*38), "ns/name")
}

// BenchmarkLookup38 is the search hot path: a 38-name datagram's worth of
// random names at 1M, looked up and grouped per server.
func BenchmarkLookup38(b *testing.B) { benchLookup(b, false) }

// BenchmarkLookup38Miss is 38 names nobody claims, in record.FIELD form so
// each also goes through the field rule (the site holds no dotted name, so
// the dotted filter sends each straight to its record: one probe).
func BenchmarkLookup38Miss(b *testing.B) { benchLookup(b, true) }
