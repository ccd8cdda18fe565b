package registry

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/pvans-project/pvans/internal/pva"
)

// model is the registry's meaning in the simplest form: for every name, the
// servers claiming it in claim order; the first is the holder.
type model struct {
	servers map[int]bool
	claims  map[string][]int
}

func (m *model) drop(s int, n string) {
	m.claims[n] = slices.DeleteFunc(m.claims[n], func(x int) bool { return x == s })
	if len(m.claims[n]) == 0 {
		delete(m.claims, n)
	}
}

func (m *model) claimedBy(s int) []string {
	var out []string
	for n, cs := range m.claims {
		if slices.Contains(cs, s) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// TestIndexAgreesWithMemdb runs random operations and checks after each
// that the lookup index, the go-memdb tables and the model agree. The
// failures it once found are kept in testdata/rapid/TestIndexAgreesWithMemdb:
// rapid.Check replays every such .fail file before its random runs
// (pgregory.net/rapid's failFilePattern), so they are regression cases.
func TestIndexAgreesWithMemdb(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap")
	rapid.Check(t, func(rt *rapid.T) {
		fieldNames := rapid.Bool().Draw(rt, "fieldNames")
		r, _ := newTest(rt, Options{MaxNames: 1 << 20, FieldNames: fieldNames})
		m := &model{servers: map[int]bool{}, claims: map[string][]int{}}
		nameGen := rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f", "g", "h", "rec", "x.Y", "rec.VAL"})
		srvGen := rapid.IntRange(1, 4)
		rt.Repeat(map[string]func(*rapid.T){
			"upsert": func(rt *rapid.T) {
				s := srvGen.Draw(rt, "s")
				mustUpsert(rt, r, s)
				m.servers[s] = true
			},
			"replace": func(rt *rapid.T) {
				s := srvGen.Draw(rt, "s")
				names := rapid.SliceOf(nameGen).Draw(rt, "names")
				err := r.ReplaceNames(guid(s), names, SourceProbe)
				if !m.servers[s] {
					if err == nil {
						rt.Fatal("replace on unknown server succeeded")
					}
					return
				}
				keep := map[string]bool{}
				for _, n := range names {
					keep[n] = true
				}
				for _, n := range m.claimedBy(s) {
					if !keep[n] {
						m.drop(s, n)
					}
				}
				for _, n := range names {
					if !slices.Contains(m.claims[n], s) {
						m.claims[n] = append(m.claims[n], s)
					}
				}
			},
			"add": func(rt *rapid.T) {
				s := srvGen.Draw(rt, "s")
				n := nameGen.Draw(rt, "n")
				err := r.AddNames(guid(s), []string{n}, SourceSearchThrough)
				if !m.servers[s] {
					if err == nil {
						rt.Fatal("add on unknown server succeeded")
					}
					return
				}
				if !slices.Contains(m.claims[n], s) {
					m.claims[n] = append(m.claims[n], s)
				}
			},
			"remove": func(rt *rapid.T) {
				s := srvGen.Draw(rt, "s")
				r.RemoveServer(guid(s))
				for _, n := range m.claimedBy(s) {
					m.drop(s, n)
				}
				delete(m.servers, s)
			},
			"snapshotReload": func(rt *rapid.T) {
				if err := r.SaveSnapshot(path); err != nil {
					rt.Fatal(err)
				}
				r2, _ := newTest(rt, Options{MaxNames: 1 << 20, FieldNames: fieldNames})
				if err := r2.LoadSnapshot(path); err != nil {
					rt.Fatal(err)
				}
				r = r2
				for s := range m.servers {
					mustUpsert(rt, r, s) // confirm
				}
			},
			"": func(rt *rapid.T) { checkAgainstModel(rt, r, m, fieldNames) },
		})
	})
}

func checkAgainstModel(t *rapid.T, r *Registry, m *model, fieldNames bool) {
	// The dotted filter counts exactly the held names with a '.'.
	dotted, counted := 0, uint32(0)
	for n := range m.claims {
		if strings.Contains(n, ".") {
			dotted++
		}
	}
	for _, c := range r.idx.dotted {
		counted += c
	}
	if int(counted) != dotted {
		t.Fatalf("dotted filter counts %d names, %d held", counted, dotted)
	}
	// Index vs model, through every read path.
	all := []string{"a", "b", "c", "d", "e", "f", "g", "h", "rec", "x.Y", "rec.VAL", "x.Y.Z"}
	q := make([]pva.SearchName, len(all))
	for i, n := range all {
		q[i] = pva.SearchName{CID: uint32(i), Name: []byte(n)}
	}
	out := make([]*Holder, len(q))
	r.LookupBatch(q, out)
	for i, n := range all {
		want := 0
		if cs := m.claims[n]; len(cs) > 0 {
			want = cs[0]
		} else if fieldNames && n == "rec.VAL" && len(m.claims["rec"]) > 0 {
			want = m.claims["rec"][0]
		}
		got := 0
		if out[i] != nil {
			got = int(out[i].GUID[11])
			if out[i].GUID != guid(got) || out[i].Addr != addr(got) {
				t.Fatalf("%s: holder %+v", n, out[i])
			}
		}
		if got != want {
			t.Fatalf("%s: holder %d, model %d (claims %v)", n, got, want, m.claims[n])
		}
	}
	// Index vs memdb: counts in the servers table, conflicts table.
	held, names := map[int]int{}, map[int]int{}
	wantDups := []string{}
	for n, cs := range m.claims {
		held[cs[0]]++
		for _, s := range cs {
			names[s]++
		}
		for _, s := range cs[1:] {
			wantDups = append(wantDups, fmt.Sprintf("%s %d>%d", n, cs[0], s))
		}
	}
	rows := r.Servers()
	if len(rows) != len(m.servers) {
		t.Fatalf("servers table %d rows, model %d", len(rows), len(m.servers))
	}
	for _, s := range rows {
		i := int(s.GUID[11])
		if !m.servers[i] || s.Held != held[i] || s.Names != names[i] {
			t.Fatalf("server %d row held=%d names=%d, model held=%d names=%d", i, s.Held, s.Names, held[i], names[i])
		}
		got, _ := claimsOf(r, s.GUID)
		if want := m.claimedBy(i); !slices.Equal(got, want) {
			t.Fatalf("server %d names %v, model %v", i, got, want)
		}
	}
	var gotDups []string
	for _, d := range r.View().Duplicates {
		h, _ := r.LookupName(d.Name)
		if h == nil || h.GUID != d.Holder {
			t.Fatalf("conflict row holder %v disagrees with index %+v", d.Holder, h)
		}
		gotDups = append(gotDups, fmt.Sprintf("%s %d>%d", d.Name, d.Holder[11], d.Claimant[11]))
	}
	slices.Sort(gotDups)
	slices.Sort(wantDups)
	if !slices.Equal(gotDups, wantDups) {
		t.Fatalf("duplicates %v, model %v", gotDups, wantDups)
	}
	c := r.Counts()
	if c.Names != len(m.claims) || c.Servers != len(m.servers) || c.Duplicates != len(wantDups) {
		t.Fatalf("counts %+v, model names %d", c, len(m.claims))
	}
	checkView(t, r.View())
	// The index's claimant counts agree with the conflicts table.
	for _, n := range listNames(r, "", 0) {
		if want := len(m.claims[n.Name]) - 1; n.Claimant != want {
			t.Fatalf("%s: %d claimants listed, model %d", n.Name, n.Claimant, want)
		}
	}
}
