package metrics

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Counter is one monotonic count. It is a plain atomic: counting is one
// add on the hot path, and the registry reads it only at scrape time.
// A Counter is declared once, as a field of a part's counters struct
// whose tag names its series (see Register).
type Counter struct{ n atomic.Uint64 }

// Add counts d.
func (c *Counter) Add(d uint64) { c.n.Add(d) }

// Load reads the count.
func (c *Counter) Load() uint64 { return c.n.Load() }

// shared are the families several parts count into, each its own
// series: their help is written here, once, so the parts cannot disagree.
var shared = map[string]string{
	"pvans_access_denied_total":        "Requests refused by the access lists, by what was refused: tcp_client, tls_client, udp_client, name, server.",
	"pvans_hints_dropped_total":        "Beacons, discovery replies and search responses not believed, by reason (docs/operations.md).",
	"pvans_repeat_names_evicted_total": "Names a repeat memory forgot before their window ended, to stay within its bound of names, by transport (via): a repeat of one is priced as a new name.",
}

var (
	nameRE  = regexp.MustCompile(`^pvans_[a-z][a-z0-9_]*_total$`)
	labelRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	valueRE = regexp.MustCompile(`^[a-z0-9_.:-]+$`)
)

// series is one declared Counter: its family name, help and labels.
type series struct {
	name, help string
	labels     prometheus.Labels
	c          *Counter
}

// key is the series as the exposition format prints it, labels sorted:
// pvans_udp_drops_total{reason="truncated"}.
func (s series) key() string {
	if len(s.labels) == 0 {
		return s.name
	}
	ks := make([]string, 0, len(s.labels))
	for k := range s.labels {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for i, k := range ks {
		ks[i] = fmt.Sprintf("%s=%q", k, s.labels[k])
	}
	return s.name + "{" + strings.Join(ks, ",") + "}"
}

// Declared walks the structs the arguments point to and returns their
// Counter fields' series. Each Counter field carries its declaration in
// tags:
//
//	claims  metrics.Counter `metric:"pvans_udp_claims_total" help:"Names answered found to UDP searches."`
//	dropTag metrics.Counter `metric:"pvans_udp_drops_total" label:"reason=tag_foreign"`
//
// help is written on the first series of a family in the structs given
// together (the families in shared take theirs from this package); label
// is k=v pairs separated by commas. Struct fields without a tag are walked
// too (an embedded group of counters); other fields are ignored. A Counter
// tagged metric:"-" is counted and deliberately not exported (a count
// another part's code takes a pointer to, read by tests). A Counter
// without a metric tag, a bad name or label, a family without help or with
// two, and a series declared twice are errors.
func Declared(counters ...any) ([]series, error) {
	var out []series
	help := map[string]string{}
	seen := map[string]bool{}
	for _, c := range counters {
		v := reflect.ValueOf(c)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			return nil, fmt.Errorf("metrics: %T is not a pointer to a struct of counters", c)
		}
		if err := walk(v.Elem(), "", &out, help, seen); err != nil {
			return nil, err
		}
	}
	for i := range out {
		out[i].help = help[out[i].name]
	}
	return out, nil
}

var counterType = reflect.TypeFor[Counter]()

func walk(v reflect.Value, path string, out *[]series, help map[string]string, seen map[string]bool) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		fv := v.Field(i)
		name := path + f.Name
		tag, tagged := f.Tag.Lookup("metric")
		if f.Type != counterType {
			if f.Type.Kind() == reflect.Struct && !tagged {
				if err := walk(fv, name+".", out, help, seen); err != nil {
					return err
				}
			} else if tagged {
				return fmt.Errorf("metrics: field %s has a metric tag but is not a metrics.Counter", name)
			}
			continue
		}
		if tag == "-" {
			continue // counted, deliberately not exported
		}
		if !nameRE.MatchString(tag) {
			return fmt.Errorf("metrics: field %s: metric %q is not pvans_<name>_total", name, tag)
		}
		s := series{name: tag, labels: prometheus.Labels{}}
		if l := f.Tag.Get("label"); l != "" {
			for _, kv := range strings.Split(l, ",") {
				k, val, ok := strings.Cut(kv, "=")
				if !ok || !labelRE.MatchString(k) || !valueRE.MatchString(val) {
					return fmt.Errorf("metrics: field %s: bad label %q (want name=value)", name, kv)
				}
				if _, dup := s.labels[k]; dup {
					return fmt.Errorf("metrics: field %s: label %q given twice", name, k)
				}
				s.labels[k] = val
			}
		}
		h := f.Tag.Get("help")
		switch have, declared := help[tag]; {
		case shared[tag] != "" && h != "":
			return fmt.Errorf("metrics: field %s: %s takes its help from package metrics", name, tag)
		case shared[tag] != "":
			help[tag] = shared[tag]
		case declared && h != "":
			return fmt.Errorf("metrics: field %s: %s has its help already (%q); write it once", name, tag, have)
		case !declared && h == "":
			return fmt.Errorf("metrics: field %s: %s has no help (tag help on its first series)", name, tag)
		case !declared:
			help[tag] = h
		}
		if seen[s.key()] {
			return fmt.Errorf("metrics: field %s: series %s declared twice", name, s.key())
		}
		seen[s.key()] = true
		// The field may be unexported (the parts count into their own
		// private structs); its address is taken without exporting it.
		s.c = (*Counter)(fv.Addr().UnsafePointer())
		*out = append(*out, s)
	}
	return nil
}

// Register exposes every Counter declared in the structs the arguments
// point to (see Declared), read at scrape time. A slip in the
// declarations panics, as MustRegister does: each part's test registers
// its counters into a fresh registry so a slip fails there first.
func (m *Metrics) Register(counters ...any) {
	if err := m.register(counters...); err != nil {
		panic(err)
	}
}

func (m *Metrics) register(counters ...any) error {
	ss, err := Declared(counters...)
	if err != nil {
		return err
	}
	for _, s := range ss {
		c := s.c
		if err := m.Reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: s.name, Help: s.help, ConstLabels: s.labels},
			func() float64 { return float64(c.Load()) })); err != nil {
			return fmt.Errorf("metrics: %s: %w", s.key(), err)
		}
	}
	return nil
}

// Check registers each argument's declarations, in turn, into one fresh
// registry: what a test of declarations runs.
func Check(counters ...any) error {
	m := &Metrics{Reg: prometheus.NewRegistry()}
	for _, c := range counters {
		if err := m.register(c); err != nil {
			return err
		}
	}
	return nil
}

// TB is what CheckExported needs of a test (*testing.T is one): package
// metrics is in every binary and does not import testing.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// CheckExported is each part's metrics test in one call: register (the
// part's RegisterMetrics) into a fresh registry, where a slip in a
// declaration fails the test (Register panics on a Counter without a
// metric tag, a bad name or label, help missing or written twice, a
// series declared or registered twice); then every series of counts
// reads, as a scrape does, what is counted into its Counter afterwards.
// Each gets a count of its own, so two series reading one Counter fail
// too. A nil Counter: the series is exported and reads 0 (a part that
// counts nothing yet).
func CheckExported(t TB, register func(*Metrics), counts map[string]*Counter) {
	t.Helper()
	if len(counts) == 0 {
		t.Fatalf("metrics: CheckExported without a series to read")
	}
	m := New("test")
	if err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%v", r)
			}
		}()
		register(m)
		return nil
	}(); err != nil {
		t.Fatalf("registering the counters: %v", err)
	}
	names := make([]string, 0, len(counts))
	for s := range counts {
		names = append(names, s)
	}
	sort.Strings(names)
	want := map[string]float64{}
	for i, s := range names {
		if c := counts[s]; c != nil {
			want[s] = float64(c.Load()) + float64(i+2)
			c.Add(uint64(i + 2))
		}
	}
	for _, s := range names {
		if v, err := m.Value(s); err != nil || v != want[s] {
			t.Errorf("%s = %v, %v; want %v", s, v, err, want[s])
		}
	}
}

// Value reads one series from the registry, named as the exposition
// format prints it (labels sorted by name), e.g.
// pvans_udp_drops_total{reason="truncated"}: how tests in other packages
// read a part's counters, as an operator would.
func (m *Metrics) Value(series string) (float64, error) {
	fams, err := m.Reg.Gather()
	if err != nil {
		return 0, err
	}
	name, _, _ := strings.Cut(series, "{")
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, x := range f.GetMetric() {
			s := seriesKey(name, x.GetLabel())
			if s != series {
				continue
			}
			switch {
			case x.Counter != nil:
				return x.GetCounter().GetValue(), nil
			case x.Gauge != nil:
				return x.GetGauge().GetValue(), nil
			}
		}
	}
	return 0, fmt.Errorf("metrics: no series %s", series)
}

func seriesKey(name string, labels []*dto.LabelPair) string {
	if len(labels) == 0 {
		return name
	}
	ks := make([]string, len(labels))
	for i, l := range labels { // Gather sorts them by name
		ks[i] = fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
	}
	return name + "{" + strings.Join(ks, ",") + "}"
}

// Sprint lists the counts of the struct counters points to, its Counter
// and atomic integer fields alike, each read atomically: for test
// failure messages (fmt's %+v would read them racily).
func Sprint(counters any) string {
	var b strings.Builder
	v := reflect.ValueOf(counters)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Sprintf("%T", counters)
	}
	sprint(&b, v.Elem(), "")
	return "{" + strings.TrimSpace(b.String()) + "}"
}

func sprint(b *strings.Builder, v reflect.Value, path string) {
	for i := 0; i < v.NumField(); i++ {
		f, fv := v.Type().Field(i), v.Field(i)
		p := fv.Addr().UnsafePointer()
		switch f.Type {
		case counterType:
			fmt.Fprintf(b, " %s%s:%d", path, f.Name, (*Counter)(p).Load())
		case reflect.TypeFor[atomic.Uint64]():
			fmt.Fprintf(b, " %s%s:%d", path, f.Name, (*atomic.Uint64)(p).Load())
		case reflect.TypeFor[atomic.Int64]():
			fmt.Fprintf(b, " %s%s:%d", path, f.Name, (*atomic.Int64)(p).Load())
		default:
			if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() != "sync" {
				sprint(b, fv, path+f.Name+".")
			}
		}
	}
}
