package insight

import (
	"fmt"
	"hash/maphash"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/pva"
)

// withProduction gives o the production values (config.Defaults and this
// package's Default constants) of the options it leaves zero, as the
// daemon builds it.
// DigestNamesPerSecond stays as given: these tests take every name (0, no
// limit) unless they test the budget.
func withProduction(o Options) Options {
	var p Options
	c := config.Defaults()
	config.FillAtStart(&p, &c)
	if o.Names == 0 {
		o.Names = p.Names
	}
	if o.Clients == 0 {
		o.Clients = DefaultClients
	}
	if o.QueueBytes == 0 {
		o.QueueBytes = DefaultQueueBytes
	}
	if o.GUIDChangesPerHour == 0 {
		o.GUIDChangesPerHour = DefaultGUIDChangesPerHour
	}
	return o
}

// srch encodes a search for names as a client would, decodes it as the
// answer path does (names are views into the payload) and records it.
func srch(t testing.TB, in *Insight, c netip.Addr, tcp bool, missing []int, found int, names ...string) {
	t.Helper()
	p, q := encoded(t, names...)
	in.Searched(c, tcp, p, q, missing, found)
}

func encoded(t testing.TB, names ...string) ([]byte, []pva.SearchName) {
	msg := pva.AppendSearch(nil, pva.FlagBigEndian, &pva.Search{Seq: 1, Names: q(names...)})
	h, payload, _, err := pva.SplitMessage(msg)
	if err != nil {
		t.Fatal(err)
	}
	var s pva.Search
	if err := s.Decode(payload, h.BigEndian()); err != nil {
		t.Fatal(err)
	}
	return payload, s.Names
}

func q(names ...string) []pva.SearchName {
	out := make([]pva.SearchName, len(names))
	for i, n := range names {
		out[i] = pva.SearchName{CID: uint32(i), Name: []byte(n)}
	}
	return out
}

func all(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

var (
	cA = netip.MustParseAddr("10.0.0.1")
	cB = netip.MustParseAddr("10.0.0.2")
	cC = netip.MustParseAddr("10.0.0.3")
)

// Three clients search for missing names at different rates (plus some
// found names): the ranking of names and clients, counts within the
// reported error, rates over the covered span, distinct clients, top
// clients and transports are right.
func TestRankingAndFigures(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	known := map[string]bool{}
	var kmu sync.Mutex
	in := New(withProduction(Options{Names: 100, Clients: 10, Clock: clk, Known: func(n string) bool { kmu.Lock(); defer kmu.Unlock(); return known[n] }}))
	// 10 s: A searches typo:A 50/s over UDP, B searches retired:B 20/s
	// over TCP, C searches typo:A and gone:C 5/s each over UDP, plus one
	// found name per message.
	for s := range 10 {
		for range 50 {
			srch(t, in, cA, false, []int{0}, 1, "typo:A", "ok:1")
		}
		for range 20 {
			srch(t, in, cB, true, []int{0}, 1, "retired:B", "ok:2")
		}
		for range 5 {
			srch(t, in, cC, false, []int{0, 1}, 0, "typo:A", "gone:C")
		}
		if s%3 == 0 {
			in.Flush() // several digests, as the background one would
		}
		clk.Advance(time.Second)
	}
	r, ok := in.Unresolved("1m", 0)
	if !ok {
		t.Fatal("1m window unknown")
	}
	if got := names(r.Names); fmt.Sprint(got) != "[typo:A retired:B gone:C]" {
		t.Fatalf("unresolved ranking %v", got)
	}
	want := map[string]uint64{"typo:A": 550, "retired:B": 200, "gone:C": 50}
	for _, u := range r.Names {
		if d := absDiff(u.Searches, want[u.Name]); d > u.MaxError || d > r.ErrorBound {
			t.Errorf("%s: %d searches, true %d, max_error %d, bound %d", u.Name, u.Searches, want[u.Name], u.MaxError, r.ErrorBound)
		}
	}
	typo := r.Names[0]
	if typo.Clients != 2 {
		t.Errorf("typo:A distinct clients %d, want 2", typo.Clients)
	}
	if len(typo.TopClients) != 2 || typo.TopClients[0].Addr != "10.0.0.1" || typo.TopClients[0].Searches != 500 || typo.TopClients[1].Addr != "10.0.0.3" {
		t.Errorf("typo:A top clients %+v", typo.TopClients)
	}
	// The data covers 00:00:00 (start) to 00:00:10.
	if secs := r.At.Sub(r.Since).Seconds(); secs != 10 {
		t.Errorf("window covers %v s, want 10", secs)
	}
	if typo.PerSecond != 55 {
		t.Errorf("typo:A %v/s, want 55", typo.PerSecond)
	}
	if !typo.FirstSeen.Equal(clk.Now().Add(-10*time.Second)) || typo.LastSeen.Before(clk.Now().Add(-2*time.Second)) {
		t.Errorf("typo:A first %v last %v (now %v)", typo.FirstSeen, typo.LastSeen, clk.Now())
	}

	cr, _ := in.Clients("1m", 0)
	if got := addrs(cr.Clients); fmt.Sprint(got) != "[10.0.0.1 10.0.0.2 10.0.0.3]" {
		t.Fatalf("client ranking %v", got)
	}
	a, b, c := cr.Clients[0], cr.Clients[1], cr.Clients[2]
	if a.Names != 1000 || a.Searches != 500 || a.NotFoundShare != 0.5 || a.Transport != "udp" || a.NamesPerSecond != 100 || a.NotFoundPerSecond != 50 {
		t.Errorf("client A %+v", a)
	}
	if b.Transport != "tcp" || b.SearchesPerSecond != 20 {
		t.Errorf("client B %+v", b)
	}
	if c.NotFoundShare != 1 {
		t.Errorf("client C %+v", c)
	}
	g := in.Gauges("1m")
	if g.UnresolvedNames != 3 || g.TopNamesPerSecond != 100 || g.TopMissingPerSecond != 50 {
		t.Errorf("gauges %+v", g)
	}
	if tot := in.Totals(); tot.Found != 700 || tot.NotFound != 800 || tot.Dropped != 0 {
		t.Errorf("totals %+v", tot)
	}

	// retired:B appears: it leaves "unresolved" at once.
	kmu.Lock()
	known["retired:B"] = true
	kmu.Unlock()
	r, _ = in.Unresolved("1h", 0)
	if got := names(r.Names); fmt.Sprint(got) != "[typo:A gone:C]" {
		t.Errorf("after retired:B appeared: %v", got)
	}
	if _, _, ok := in.Name("retired:B"); ok {
		t.Error("Name still reports retired:B")
	}
	if u, _, ok := in.Name("gone:C"); !ok || u.Searches != 50 || u.Clients != 1 {
		t.Errorf("Name(gone:C) = %+v, %v", u, ok)
	}
}

// The windows move: after a minute of silence the 1m window is empty, the
// hour still remembers; after more than an hour both are empty.
func TestWindowsRoll(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	in := New(withProduction(Options{Names: 10, Clients: 10, Clock: clk}))
	srch(t, in, cA, false, []int{0}, 0, "x")
	in.Flush() // records are stamped when digested
	clk.Advance(40 * time.Second)
	if r, _ := in.Unresolved("1m", 0); len(r.Names) != 1 {
		t.Fatalf("1m after 40 s: %v", names(r.Names))
	}
	clk.Advance(40 * time.Second) // 80 s: the period it was in has left the window
	if r, _ := in.Unresolved("1m", 0); len(r.Names) != 0 || r.At.Sub(r.Since) > time.Minute {
		t.Errorf("1m after 80 s: %v, covering %v", names(r.Names), r.At.Sub(r.Since))
	}
	if r, _ := in.Unresolved("1h", 0); len(r.Names) != 1 {
		t.Errorf("1h after 80 s: %v", names(r.Names))
	}
	clk.Advance(2 * time.Hour)
	if r, _ := in.Unresolved("1h", 0); len(r.Names) != 0 {
		t.Errorf("1h after 2 h: %v", names(r.Names))
	}
	if _, ok := in.Unresolved("5m", 0); ok {
		t.Error("unknown window accepted")
	}
}

// With more distinct names than slots, the heavy names are still found and
// counted within the bound, while a stream of one-off names churns
// through the other slots.
func TestHeavyHittersSurviveChurn(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	// Every message counted (no sampling) even though the fake clock does
	// not move: this is the space-saving bound alone.
	in := New(withProduction(Options{Names: 50, Clients: 50, Clock: clk, DigestNamesPerSecond: -1}))
	truth := map[string]uint64{}
	for i := range 20000 {
		n := fmt.Sprintf("noise:%d", i) // 20,000 distinct one-offs
		if i%4 == 0 {
			n = fmt.Sprintf("heavy:%d", i%40/4) // 10 names, 500 each
		}
		truth[n]++
		srch(t, in, netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), false, []int{0}, 0, n)
		if i%1000 == 0 {
			in.Flush()
		}
	}
	r, _ := in.Unresolved("1m", 10)
	if r.ErrorBound == 0 || r.Counted != 20000 {
		t.Fatalf("counted %d, bound %d", r.Counted, r.ErrorBound)
	}
	for i, u := range r.Names {
		if u.Name[:6] != "heavy:" {
			t.Errorf("rank %d is %s (%d searches, bound %d)", i, u.Name, u.Searches, r.ErrorBound)
		}
		if d := absDiff(u.Searches, truth[u.Name]); d > u.MaxError || d > r.ErrorBound {
			t.Errorf("%s: %d, true %d, max_error %d, bound %d", u.Name, u.Searches, truth[u.Name], u.MaxError, r.ErrorBound)
		}
	}
	if n, _ := in.Evictions(); n == 0 {
		t.Error("no evictions counted")
	}
}

// A full staging buffer drops records (counted), never blocks and never
// grows.
func TestStagingBound(t *testing.T) {
	in := New(withProduction(Options{QueueBytes: 1, Clock: clock.NewFake(time.Time{})})) // rounded up to the minimum
	for i := range 100 {
		in.Searched(cA, false, nil, q(fmt.Sprintf("%01000d", i)), []int{0}, 0)
	}
	if tot := in.Totals(); tot.Dropped == 0 || tot.NotFound != 100 {
		t.Errorf("totals %+v", tot)
	}
	if c := cap(in.stages[int(cA.As16()[15])%shards].buf); c != 4096 {
		t.Errorf("staging buffer cap %d", c)
	}
	in.Flush()
	if r, _ := in.Unresolved("1m", 0); len(r.Names) == 0 || len(r.Names) >= 100 {
		t.Errorf("after drops: %+v", r.Names)
	}
}

// The names are copied whatever they are views into (the payload, or
// not): every way reads back the same.
func TestStagedNamesWhateverThePayload(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	a, b := New(withProduction(Options{Clock: clk})), New(withProduction(Options{Clock: clk}))
	p, qs := encoded(t, "first", "found:1", "x:middle", "found:2", "last:one")
	miss := []int{0, 2, 4}
	a.Searched(cA, false, p, qs, miss, 2)
	b.Searched(cA, false, nil, qs, miss, 2)
	b.Searched(cA, false, []byte("unrelated payload"), qs, miss, 2) // not views into it: copied
	ra, _ := a.Unresolved("1m", 0)
	rb, _ := b.Unresolved("1m", 0)
	if got := fmt.Sprint(names(ra.Names)); got != "[first last:one x:middle]" {
		t.Errorf("with the payload: %s", got)
	}
	if fmt.Sprint(names(rb.Names)) != fmt.Sprint(names(ra.Names)) || rb.Names[0].Searches != 2 {
		t.Errorf("without: %+v", rb.Names)
	}
}

// Long names (≥ 254 bytes: their size needs the 4-byte form) in either
// byte order are staged whole; a name beyond maxName is cut there.
func TestLongNamesBothOrders(t *testing.T) {
	long := strings.Repeat("L", 300)
	for _, flags := range []uint8{pva.FlagBigEndian, 0} {
		in := New(withProduction(Options{Clock: clock.NewFake(time.Time{})}))
		msg := pva.AppendSearch(nil, flags, &pva.Search{Seq: 1, Names: q("a", long+"1", "found", long+"2")})
		h, payload, _, err := pva.SplitMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		var sr pva.Search
		if err := sr.Decode(payload, h.BigEndian()); err != nil {
			t.Fatal(err)
		}
		in.Searched(cA, false, payload, sr.Names, []int{1, 3}, 2)
		r, _ := in.Unresolved("1m", 0)
		if got := names(r.Names); len(got) != 2 || got[0] != long+"1" || got[1] != long+"2" {
			t.Errorf("flags %#x: %d names %q…", flags, len(got), fmt.Sprint(got)[:20])
		}
		huge := strings.Repeat("H", maxName+10)
		in.Searched(cB, false, nil, q(huge), []int{0}, 0)
		if u, _, ok := in.Name(huge[:maxName]); !ok || u.Searches != 1 {
			t.Errorf("a name beyond maxName: %+v %v", u, ok)
		}
	}
}

// Repeated searches are folded into the previous record (up to 65,535
// repeats), never across clients or different searches, and every one is
// counted.
func TestRepeatsCounted(t *testing.T) {
	in := New(withProduction(Options{Clock: clock.NewFake(time.Time{}), QueueBytes: 64 << 20}))
	pa, qa := encoded(t, "storm:1", "storm:2", "ok")
	pb, qb := encoded(t, "other")
	for i := range 70000 {
		in.Searched(cA, false, pa, qa, []int{0, 1}, 1)
		if i%1000 == 999 {
			in.Searched(cB, true, pb, qb, []int{0}, 0)
		}
	}
	in.Searched(cA, false, pa, qa, []int{0}, 1) // same names, another result
	r, _ := in.Unresolved("1m", 0)
	got := map[string]uint64{}
	for _, u := range r.Names {
		got[u.Name] = u.Searches
	}
	if got["storm:1"] != 70001 || got["storm:2"] != 70000 || got["other"] != 70 {
		t.Errorf("counts %v", got)
	}
	c, _ := in.Clients("1m", 0)
	if c.Clients[0].Addr != "10.0.0.1" || c.Clients[0].Searches != 70001 || c.Clients[0].NotFound != 140001 || c.Clients[1].Searches != 70 {
		t.Errorf("clients %+v", c.Clients)
	}
}

// A search is a repeat of the last record only for the same names: two
// searches whose stretches of payload are the same bytes, split into
// names elsewhere (a CID's bytes in one are a name's in the other), are
// two records, each name counted as searched.
func TestRepeatSameBytesOtherNames(t *testing.T) {
	in := New(withProduction(Options{Clock: clock.NewFake(time.Time{})}))
	wire := func(names ...pva.SearchName) ([]byte, []pva.SearchName) {
		msg := pva.AppendSearch(nil, pva.FlagBigEndian, &pva.Search{Seq: 1, Names: names})
		_, payload, _, err := pva.SplitMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		var s pva.Search
		if err := s.Decode(payload, true); err != nil {
			t.Fatal(err)
		}
		return payload, s.Names
	}
	// Both stretches: 'a' 01 02 03 04 03 02 'x' 'y'.
	pa, qa := wire(pva.SearchName{CID: 9, Name: []byte("a")}, pva.SearchName{CID: 0x01020304, Name: []byte("\x02xy")})
	pb, qb := wire(pva.SearchName{CID: 9, Name: []byte("a\x01")}, pva.SearchName{CID: 0x02030403, Name: []byte("xy")})
	if sa, sb := pa[len(pa)-9:], pb[len(pb)-9:]; string(sa) != string(sb) {
		t.Fatalf("stretches differ: % x, % x", sa, sb)
	}
	in.Searched(cA, false, pa, qa, []int{0, 1}, 0)
	in.Searched(cA, false, pb, qb, []int{0, 1}, 0)
	in.Searched(cA, false, pb, qb, []int{0, 1}, 0) // a true repeat
	r, _ := in.Unresolved("1m", 0)
	got := map[string]uint64{}
	for _, u := range r.Names {
		got[u.Name] = u.Searches
	}
	want := map[string]uint64{"a": 1, "\x02xy": 1, "a\x01": 2, "xy": 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("names %v, want %v", got, want)
	}
}

// The background digest runs on its own (real clock) and stops on Close.
func TestBackgroundDigest(t *testing.T) {
	in := New(withProduction(Options{DigestEvery: 10 * time.Millisecond}))
	in.Start()
	defer in.Close()
	srch(t, in, cA, true, []int{0}, 0, "bg")
	deadline := time.Now().Add(30 * time.Second)
	for {
		in.mu.Lock()
		w := &in.win[0]
		_, ok := w.names[w.cur].slot("bg")
		in.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("background digest never ran")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func names(us []Unresolved) []string {
	var out []string
	for _, u := range us {
		out = append(out, u.Name)
	}
	return out
}

func addrs(cs []Client) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Addr)
	}
	return out
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// Beyond DigestNamesPerSecond (a storm of distinct missing names) the name
// summaries take a weighted sample: the digest's work stays within the
// budget, the heavy names still rank first with unbiased estimates, the
// report says it sampled, client figures stay exact, and traffic within
// the budget is counted exactly again in a later window.
func TestStormOfDistinctNamesIsSampled(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const budget = 1000
	in := New(withProduction(Options{Names: 200, Clients: 50, Clock: clk, DigestNamesPerSecond: budget}))
	truth := map[string]uint64{}
	const secs, perSec = 10, 20000 // 20× the budget
	for s := range secs {
		for i := range perSec {
			n := fmt.Sprintf("storm:%d:%d", s, i)
			if i%10 == 0 {
				n = fmt.Sprintf("heavy:%d", i%50/10) // 5 names, 400/s each
			}
			truth[n]++
			srch(t, in, cA, false, []int{0}, 0, n)
			if i%2000 == 0 {
				in.Flush()
			}
		}
		in.Flush()
		clk.Advance(time.Second)
	}
	r, _ := in.Unresolved("1m", 5)
	if r.SampleRate >= 0.2 || r.SampleRate <= 0 {
		t.Fatalf("sample rate %v: a storm of 20× the budget must be sampled", r.SampleRate)
	}
	total := uint64(secs * perSec)
	if out := in.SampledOut(); out < total*8/10 {
		t.Errorf("only %d of %d names left out: the budget of %d/s was not kept", out, total, budget)
	}
	// Unbiased: N estimates the true total within a few standard errors.
	if d := absDiff(r.Counted, total); float64(d) > 5*math.Sqrt(float64(total)*(1-r.SampleRate)/r.SampleRate) {
		t.Errorf("estimated %d names counted, true %d (rate %.3f)", r.Counted, total, r.SampleRate)
	}
	for i, u := range r.Names {
		if !strings.HasPrefix(u.Name, "heavy:") {
			t.Fatalf("rank %d is %s (%d searches)", i, u.Name, u.Searches)
		}
		c := float64(truth[u.Name])
		if d := absDiff(u.Searches, truth[u.Name]); float64(d) > float64(u.MaxError)+5*math.Sqrt(c*(1-r.SampleRate)/r.SampleRate) {
			t.Errorf("%s: %d searches, true %d, max_error %d, rate %.3f", u.Name, u.Searches, truth[u.Name], u.MaxError, r.SampleRate)
		}
	}
	c, _ := in.Clients("1m", 1)
	if c.Clients[0].Searches != total || c.Clients[0].NotFound != total {
		t.Errorf("client figures must stay exact: %+v", c.Clients[0])
	}
	// Two hours later, a trickle within the budget is counted exactly.
	clk.Advance(2 * time.Hour)
	for range 300 {
		srch(t, in, cB, false, []int{0}, 0, "trickle")
	}
	r, _ = in.Unresolved("1m", 0)
	if r.SampleRate != 1 || len(r.Names) != 1 || r.Names[0].Searches != 300 {
		t.Errorf("after the storm: rate %v, names %+v", r.SampleRate, r.Names)
	}
}

// An idle Insight schedules nothing: the digest timer is armed by the
// first search staged after a digest, not by a ticker.
func TestNoDigestTimerWhileIdle(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	in := New(withProduction(Options{Clock: clk}))
	in.Start()
	defer in.Close()
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers pending while nothing is staged", n)
	}
	srch(t, in, cA, false, []int{0}, 0, "wake")
	srch(t, in, cA, false, []int{0}, 0, "wake2")
	if n := clk.Pending(); n != 1 {
		t.Fatalf("%d timers pending after two searches, want one", n)
	}
	clk.Advance(time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r, _ := in.Unresolved("1m", 0); len(r.Names) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("staged searches never digested")
		}
		time.Sleep(time.Millisecond)
	}
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers pending after the digest, nothing staged", n)
	}
}

// In a storm the answer path itself samples: once a digest has seen more
// names than the budget, most searches are staged light (their counts,
// not their names), so the staging copy stops growing with the names.
func TestStormStagesLightOnTheAnswerPath(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	in := New(withProduction(Options{Names: 100, Clients: 10, Clock: clk, DigestNamesPerSecond: 100}))
	if p := in.stageRate(); p != 1 {
		t.Fatalf("stage rate %v before any traffic", p)
	}
	for i := range 10000 {
		srch(t, in, cA, false, []int{0}, 0, fmt.Sprintf("storm:%d", i))
	}
	in.Flush()
	p := in.stageRate()
	if p > 0.02 {
		t.Fatalf("stage rate %v after 10,000 names against a budget of 100/s", p)
	}
	s := &in.stages[int(cA.As16()[15])%shards]
	full := 0
	for i := range 10000 {
		srch(t, in, cA, false, []int{0}, 0, fmt.Sprintf("storm2:%d", i))
	}
	for b := s.buf; len(b) >= recHeader; b = b[recordLen(b):] {
		if b[16]&flagLight == 0 {
			full++
		}
	}
	if full > 300 {
		t.Errorf("%d of 10,000 searches staged in full at rate %v", full, p)
	}
	c, _ := in.Clients("1m", 1)
	if c.Clients[0].Searches != 20000 || c.Clients[0].NotFound != 20000 {
		t.Errorf("client figures must stay exact: %+v", c.Clients[0])
	}
}

// Two clients whose hashes share a bit of the distinct-client bitmap (1 in
// 256 pairs with a random seed) are still counted as two: the name's top
// clients name them.
func TestDistinctClientsSurviveABitmapCollision(t *testing.T) {
	s := newNameSum(10, maphash.MakeSeed())
	name := []byte("typo:A")
	h := maphash.Bytes(s.seed, name)
	s.add(name, h, cA, 5, 3, 1)
	s.add(name, h, cC, 5+256, 2, 2) // the same bit: b = ch & 255
	i, ok := s.slot("typo:A")
	if !ok {
		t.Fatal("name not kept")
	}
	u := mergeName("typo:A", &s, &s, i, -1, 1)
	if u.Clients != 2 {
		t.Fatalf("distinct clients %d, want 2 (top clients %+v)", u.Clients, u.TopClients)
	}
}

// A search whose names were all found is a record of its counts alone,
// and the digest reads past it.
func TestAllFoundThenMissing(t *testing.T) {
	in := New(withProduction(Options{Clock: clock.NewFake(time.Time{})}))
	srch(t, in, cA, false, nil, 2, "ok:1", "ok:2")
	srch(t, in, cA, false, []int{0}, 0, "gone:1")
	srch(t, in, cA, true, nil, 1, "ok:1")
	r, _ := in.Unresolved("1m", 0)
	c, _ := in.Clients("1m", 0)
	if got := names(r.Names); len(got) != 1 || got[0] != "gone:1" || len(c.Clients) != 1 || c.Clients[0].Searches != 3 || c.Clients[0].Names != 4 {
		t.Fatalf("names %v, clients %+v", got, c.Clients)
	}
}

// A payload with bytes after its last name (Decode allows them): the
// names are not where their lengths back from the end say, which the
// address check sees, and they are copied instead; either way the digest
// reads exactly the unclaimed names.
func TestPayloadWithTrailingBytes(t *testing.T) {
	in := New(withProduction(Options{Clock: clock.NewFake(time.Time{})}))
	p, _ := encoded(t, "t:first", "t:found", "t:last")
	p = append(p[:len(p):len(p)], 0, 0, 0, 0, 0)
	var s pva.Search
	if err := s.Decode(p, true); err != nil {
		t.Fatal(err)
	}
	in.Searched(cA, false, p, s.Names, []int{0, 2}, 1)
	r, _ := in.Unresolved("1m", 0)
	if got := fmt.Sprint(names(r.Names)); got != "[t:first t:last]" {
		t.Fatalf("names %s", got)
	}
}

// The payload's stretch is staged where Decode noted the names
// (pva.SearchName.Off), bytes after the last name or not; names built by
// hand (no offset), even views into the payload, and offsets the names
// do not fill are copied instead, and the digest reads the same names.
func TestWireSpanAtDecodedOffsets(t *testing.T) {
	p, qs := encoded(t, "w:first", "w:found", "w:last")
	long := append(p[:len(p):len(p)], 0, 0, 0, 0, 0) // trailing bytes
	var ls pva.Search
	if err := ls.Decode(long, true); err != nil {
		t.Fatal(err)
	}
	byHand := []pva.SearchName{{CID: 0, Name: qs[0].Name}, {CID: 1, Name: qs[1].Name}, {CID: 2, Name: qs[2].Name}}
	lying := slices.Clone(qs)
	lying[1].Name = lying[1].Name[:2] // the ends are right, the middle does not fill the stretch
	for _, c := range []struct {
		name    string
		payload []byte
		names   []pva.SearchName
		wire    bool
	}{
		{"decoded", p, qs, true},
		{"trailing bytes", long, ls.Names, true},
		{"by hand", p, byHand, false},
		{"lying", p, lying, false},
	} {
		in := New(withProduction(Options{Clock: clock.NewFake(time.Time{})}))
		in.Searched(cA, false, c.payload, c.names, []int{0, 2}, 1)
		s := &in.stages[int(cA.As16()[15])%shards]
		if got := s.buf[offFlags]&flagWire != 0; got != c.wire {
			t.Errorf("%s: staged from the payload %v, want %v", c.name, got, c.wire)
		}
		r, _ := in.Unresolved("1m", 0)
		if got := fmt.Sprint(names(r.Names)); got != "[w:first w:last]" {
			t.Errorf("%s: names %s", c.name, got)
		}
	}
}

// A repeat of the shard's last record takes no room in the buffer: with
// the buffer full it is still counted a repeat, not dropped, in a storm
// sampled light (the answer path's commonest repeat) as with its names.
func TestRepeatCountedWhenBufferFull(t *testing.T) {
	for _, light := range []bool{true, false} {
		in := New(withProduction(Options{QueueBytes: 1, Clock: clock.NewFake(time.Time{})}))
		if light {
			in.stageP.Store(math.Float64bits(0)) // every search staged light
		}
		s := &in.stages[int(cA.As16()[15])%shards]
		p, qs := encoded(t, "storm:1", "ok")
		n := 0
		for found := 0; cap(s.buf)-len(s.buf) >= recHeader+4+2+len("storm:1"); found++ {
			in.Searched(cA, false, p, qs, []int{0}, found) // each a record of its own
			n++
		}
		for range 3 {
			in.Searched(cA, false, p, qs, []int{0}, n-1) // the last one again
		}
		if tot := in.Totals(); tot.Dropped != 0 || tot.NotFound != uint64(n+3) {
			t.Errorf("light %v: %d records then 3 repeats: totals %+v", light, n, tot)
		}
		c, _ := in.Clients("1m", 1)
		if len(c.Clients) != 1 || c.Clients[0].Searches != uint64(n+3) {
			t.Errorf("light %v: clients %+v, want %d searches", light, c.Clients, n+3)
		}
	}
}

// A repeat is the same search from the same client with the same result
// and weight: the same payload from another client of the shard, over
// the other transport, with another found count or weight is a record
// of its own, each client and name counted as searched.
func TestRepeatOnlyOfTheSameHeader(t *testing.T) {
	cE := netip.MustParseAddr("10.0.0.5") // cA's shard
	if int(cE.As16()[15])%shards != int(cA.As16()[15])%shards {
		t.Fatal("cE is not in cA's shard")
	}
	in := New(withProduction(Options{Clock: clock.NewFake(time.Time{})}))
	p, qs := encoded(t, "storm:1", "storm:2", "held")
	in.Searched(cA, false, p, qs, []int{0, 1}, 1)
	in.Searched(cE, false, p, qs, []int{0, 1}, 1) // another client
	in.Searched(cE, true, p, qs, []int{0, 1}, 1)  // over TCP
	in.Searched(cE, true, p, qs, []int{0, 1}, 0)  // another result
	s := &in.stages[int(cA.As16()[15])%shards]
	h := header{client: cE.As16(), flags: flagTCP, names: 3, missing: 2, weight: 2}
	if s.repeatsWire(&h, p, qs, []int{0, 1}) { // another weight
		t.Error("a search of another weight counted a repeat")
	}
	in.Searched(cE, true, p, qs, []int{0, 1}, 0) // a true repeat
	var records int
	for b := s.buf; len(b) >= recHeader; b = b[recordLen(b):] {
		records++
	}
	if records != 4 {
		t.Errorf("%d records, want 4", records)
	}
	c, _ := in.Clients("1m", 0)
	got := map[string]uint64{}
	for _, cl := range c.Clients {
		got[cl.Addr+" "+cl.Transport] = cl.Searches
	}
	if want := map[string]uint64{"10.0.0.1 udp": 1, "10.0.0.5 udp+tcp": 4}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("clients %v, want %v", got, want)
	}
	r, _ := in.Unresolved("1m", 0)
	for _, u := range r.Names {
		if u.Searches != 5 {
			t.Errorf("%s searched %d times, want 5", u.Name, u.Searches)
		}
	}
}

// The names, not the payload, say what was searched: names decoded from
// one payload, passed with another of the same layout (a copy of an
// earlier search), are staged as themselves, never as the other's bytes
// at their offsets, nor counted a repeat of the search it copies.
func TestNamesNotViewsIntoThePayloadAreCopied(t *testing.T) {
	in := New(withProduction(Options{Clock: clock.NewFake(time.Time{})}))
	py, qy := encoded(t, "y:one", "y:two")
	_, qx := encoded(t, "x:one", "x:two")
	in.Searched(cA, false, py, qy, []int{0, 1}, 0)
	other := slices.Clone(py) // y's bytes, not x's names' buffer
	in.Searched(cA, false, other, qx, []int{0, 1}, 0)
	in.Searched(cA, false, other, qx, []int{1}, 1) // not dense: put's path
	r, _ := in.Unresolved("1m", 0)
	got := map[string]uint64{}
	for _, u := range r.Names {
		got[u.Name] = u.Searches
	}
	if want := map[string]uint64{"x:one": 1, "x:two": 2, "y:one": 1, "y:two": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("names %v, want %v", got, want)
	}
}
