package metrics

import (
	"fmt"
	"strings"
	"testing"
)

type fwd struct {
	forwards Counter `metric:"pvans_t_forwards_total" help:"Forwards."`
}

type good struct {
	claims    Counter `metric:"pvans_t_claims_total" help:"Claims."`
	truncated Counter `metric:"pvans_t_drops_total" label:"reason=truncated" help:"Drops, by reason."`
	malformed Counter `metric:"pvans_t_drops_total" label:"reason=malformed"`
	mismatch  Counter `metric:"pvans_hints_dropped_total" label:"reason=t_mismatch"`
	pair      Counter `metric:"pvans_t_pairs_total" label:"via=udp,result=ok" help:"Pairs."`
	fwd
	internal uint64  // not a Counter: not declared, not exported
	private  Counter `metric:"-"`
}

func TestRegisterExposesEachDeclaredSeries(t *testing.T) {
	var c good
	m := New("test")
	m.Register(&c)
	c.claims.Add(3)
	c.malformed.Add(2)
	c.mismatch.Add(1)
	c.pair.Add(4)
	c.forwards.Add(5)
	// Neither a plain field nor a Counter tagged "-" is exported: counting
	// into them changes no series below.
	c.internal++
	c.private.Add(7)
	if c.truncated.Load() != 0 || c.private.Load() != 7 || c.internal != 1 {
		t.Fatal("counters read back wrong")
	}
	for series, want := range map[string]float64{
		`pvans_t_claims_total`:                           3,
		`pvans_t_drops_total{reason="truncated"}`:        0,
		`pvans_t_drops_total{reason="malformed"}`:        2,
		`pvans_hints_dropped_total{reason="t_mismatch"}`: 1,
		`pvans_t_pairs_total{result="ok",via="udp"}`:     4,
		`pvans_t_forwards_total`:                         5,
	} {
		got, err := m.Value(series)
		if err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", series, got, err, want)
		}
	}
	if _, err := m.Value(`pvans_t_drops_total{reason="other"}`); err == nil {
		t.Error("an undeclared series was read")
	}
}

// Each slip a declaration can make is refused by Check, the test every
// part runs on its counters struct.
func TestCheckRefusesSlips(t *testing.T) {
	for _, tc := range []struct {
		name     string
		counters any
		want     string
	}{
		{"no tag", &struct {
			a Counter
		}{}, "not pvans_"},
		{"no _total", &struct {
			a Counter `metric:"pvans_t_a" help:"A."`
		}{}, "not pvans_"},
		{"no prefix", &struct {
			a Counter `metric:"t_a_total" help:"A."`
		}{}, "not pvans_"},
		{"no help", &struct {
			a Counter `metric:"pvans_t_a_total"`
		}{}, "no help"},
		{"help twice", &struct {
			a Counter `metric:"pvans_t_a_total" label:"k=x" help:"A."`
			b Counter `metric:"pvans_t_a_total" label:"k=y" help:"A again."`
		}{}, "write it once"},
		{"shared help", &struct {
			a Counter `metric:"pvans_hints_dropped_total" label:"reason=x" help:"Mine."`
		}{}, "from package metrics"},
		{"bad label", &struct {
			a Counter `metric:"pvans_t_a_total" label:"reason" help:"A."`
		}{}, "bad label"},
		{"bad label name", &struct {
			a Counter `metric:"pvans_t_a_total" label:"Reason=x" help:"A."`
		}{}, "bad label"},
		{"label twice", &struct {
			a Counter `metric:"pvans_t_a_total" label:"k=x,k=y" help:"A."`
		}{}, "twice"},
		{"same series", &struct {
			a Counter `metric:"pvans_t_a_total" label:"k=x" help:"A."`
			b Counter `metric:"pvans_t_a_total" label:"k=x"`
		}{}, "declared twice"},
		{"labels differ in a family", &struct {
			a Counter `metric:"pvans_t_a_total" label:"k=x" help:"A."`
			b Counter `metric:"pvans_t_a_total" label:"j=x"`
		}{}, "pvans_t_a_total"},
		{"tag on another type", &struct {
			a uint64 `metric:"pvans_t_a_total" help:"A."`
		}{}, "not a metrics.Counter"},
		{"slip in a nested group", &struct {
			g struct{ a Counter }
		}{}, "g.a"},
		{"not a pointer", good{}, "not a pointer"},
	} {
		err := Check(tc.counters)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error with %q", tc.name, err, tc.want)
		}
	}
	if err := Check(&good{}); err != nil {
		t.Errorf("good declarations refused: %v", err)
	}
	// The same family from two parts (two structs) must agree on labels.
	a := &struct {
		a Counter `metric:"pvans_t_a_total" label:"k=x" help:"A."`
	}{}
	b := &struct {
		b Counter `metric:"pvans_t_a_total" help:"A."`
	}{}
	if err := Check(a, b); err == nil {
		t.Error("one family with different labels in two parts accepted")
	}
	// Structs registered together share a family's help, written once.
	c := &struct {
		c Counter `metric:"pvans_t_a_total" label:"k=y"`
	}{}
	m := New("test")
	m.Register(a, c)
	if _, err := m.Value(`pvans_t_a_total{k="y"}`); err != nil {
		t.Error(err)
	}
	if err := Check(c); err == nil {
		t.Error("a family's series without its help accepted alone")
	}
}

// The hot path is one atomic add, as with a bare atomic.Uint64.
func BenchmarkCounterAdd(b *testing.B) {
	var c good
	for b.Loop() {
		c.claims.Add(1)
	}
}

func TestSprintReadsEachCount(t *testing.T) {
	var c good
	c.claims.Add(3)
	c.forwards.Add(5)
	s := Sprint(&c)
	for _, want := range []string{"claims:3", "fwd.forwards:5", "private:0"} {
		if !strings.Contains(s, want) {
			t.Errorf("%s lacks %s", s, want)
		}
	}
}

// fakeTB records what CheckExported reports; Fatalf stops the check as
// testing's does (here by a panic the case recovers).
type fakeTB struct{ failed []string }

type fatal struct{}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.failed = append(f.failed, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	panic(fatal{})
}

func (f *fakeTB) run(check func(TB)) {
	defer func() {
		if r := recover(); r != nil && r != (fatal{}) {
			panic(r)
		}
	}()
	check(f)
}

// CheckExported, each part's metrics test, fails on every slip a part's
// declarations or its test can make, and passes good ones.
func TestCheckExportedFailsOnSlips(t *testing.T) {
	var c good
	for _, tc := range []struct {
		name     string
		register func(*Metrics)
		counts   map[string]*Counter
		want     string // in the report; "" passes
	}{
		{"good", func(m *Metrics) { m.Register(&c) },
			map[string]*Counter{`pvans_t_claims_total`: &c.claims, `pvans_t_drops_total{reason="malformed"}`: &c.malformed}, ""},
		{"untagged Counter", func(m *Metrics) { m.Register(&struct{ a Counter }{}) },
			map[string]*Counter{`pvans_t_claims_total`: nil}, "not pvans_"},
		{"registered twice", func(m *Metrics) { m.Register(&c); m.Register(&c) },
			map[string]*Counter{`pvans_t_claims_total`: &c.claims}, "registering"},
		{"series declared twice", func(m *Metrics) {
			m.Register(&struct {
				a Counter `metric:"pvans_t_a_total" help:"A."`
				b Counter `metric:"pvans_t_a_total"`
			}{})
		}, map[string]*Counter{`pvans_t_a_total`: nil}, "declared twice"},
		{"another series' Counter", func(m *Metrics) { m.Register(&c) },
			map[string]*Counter{`pvans_t_claims_total`: &c.forwards}, "pvans_t_claims_total ="},
		{"one Counter for two series", func(m *Metrics) { m.Register(&c) },
			map[string]*Counter{`pvans_t_claims_total`: &c.claims, `pvans_t_forwards_total`: &c.claims}, " = "},
		{"two series' tags swapped", func(m *Metrics) { m.Register(&c) },
			map[string]*Counter{`pvans_t_drops_total{reason="malformed"}`: &c.truncated, `pvans_t_drops_total{reason="truncated"}`: &c.malformed}, " = "},
		{"not exported", func(m *Metrics) { m.Register(&c) },
			map[string]*Counter{`pvans_t_private_total`: &c.private}, "no series"},
		{"nothing read", func(m *Metrics) { m.Register(&c) }, nil, "without a series"},
	} {
		c = good{}
		f := &fakeTB{}
		f.run(func(tb TB) { CheckExported(tb, tc.register, tc.counts) })
		got := strings.Join(f.failed, "\n")
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: reported %q; want %q", tc.name, got, tc.want)
		}
	}
}
