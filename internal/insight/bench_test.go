package insight

import (
	"fmt"
	"math"
	"net/netip"
	"testing"

	"github.com/pvans-project/pvans/internal/pva"
)

type msg struct {
	payload []byte
	names   []pva.SearchName
}

// names38 is a decoded 38-name search: names are views into the payload,
// as on the answer path.
func names38(b *testing.B, prefix string, i int) msg {
	ns := make([]string, 38)
	for j := range ns {
		ns[j] = fmt.Sprintf("%s:C%02d-XX:Dev%07d}Val-I", prefix, j%30, i+j)
	}
	p, q := encoded(b, ns...)
	return msg{p, q}
}

// BenchmarkSearched38Missing is what the answer path pays per search
// message: one 38-name search, all unclaimed, copied into the staging
// buffer. The buffer is emptied outside the timer, so every record is
// staged (the dearer path; a full buffer only counts a drop). "repeat"
// searches the same names again and again (a storm of retries: each
// search is compared with the previous record and only bumps its
// repeats), "distinct" new names every time (each is copied). Neither
// depends on what the summaries hold.
//
// "storm" is "distinct" beyond the digest's budget, at a 1 % sampling rate:
// most searches are staged light (their counts, not their names).
//
// "half" is "distinct" with the first 19 names unclaimed and the other 19
// found: the stretch staged ends before the found names.
//
// "off" is insight turned off (a nil *Insight, as the daemon passes).
func BenchmarkSearched38Missing(b *testing.B) {
	for _, mode := range []string{"off", "repeat", "distinct", "storm", "half"} {
		b.Run(mode, func(b *testing.B) {
			in := New(withProduction(Options{}))
			if mode == "off" {
				in = nil
			}
			if mode == "storm" {
				in.stageP.Store(math.Float64bits(0.01))
			}
			qs := make([]msg, 16) // hot in cache, as just after decoding
			for i := range qs {
				if mode == "repeat" {
					qs[i] = names38(b, "MISS", 0)
				} else {
					qs[i] = names38(b, fmt.Sprintf("M%d", i), i*38)
				}
			}
			miss, found := all(38), 0
			if mode == "half" {
				miss, found = all(19), 19
			}
			client := netip.MustParseAddr("10.0.0.9")
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				m := &qs[i%len(qs)]
				in.Searched(client, false, m.payload, m.names, miss, found)
				i++
				if i%64 == 0 && in != nil { // a few stores per 64 searches: not worth stopping the timer
					for j := range in.stages {
						in.stages[j].buf, in.stages[j].last = in.stages[j].buf[:0], -1
					}
				}
			}
			if in == nil {
				return
			}
			if d := in.Totals().Dropped; d != 0 {
				b.Fatalf("%d names dropped", d)
			}
		})
	}
}

// BenchmarkDigest38Missing is the digest's cost per name taken, off the
// answer path: 50 staged 38-name records from 5 clients folded into both
// windows' summaries per digest, for names already kept (repeat: a storm
// of retries) or each taking a slot (distinct). Every name is taken (no
// sampling budget): this is the cost the budget multiplies.
func BenchmarkDigest38Missing(b *testing.B) {
	for _, mode := range []string{"repeat", "distinct"} {
		b.Run(mode, func(b *testing.B) {
			in := New(withProduction(Options{DigestNamesPerSecond: -1}))
			miss := all(38)
			qs := make([]msg, 50)
			for i := range qs {
				qs[i] = names38(b, "MISS", 0)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if mode == "distinct" {
					b.StopTimer()
					for j := range qs {
						qs[j] = names38(b, "D", (i*len(qs)+j)*38)
					}
					b.StartTimer()
				}
				for j, q := range qs {
					in.Searched(netip.AddrFrom4([4]byte{10, 0, 0, byte(j % 5)}), false, q.payload, q.names, miss, 0)
				}
				in.Flush()
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*len(qs)*38), "ns/name")
		})
	}
}
