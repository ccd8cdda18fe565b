package probe

import (
	"fmt"
	"math/bits"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pvans-project/pvans/internal/pva"
)

var (
	allPhases  = []phase{phaseNew, phaseListed, phaseRefused, phaseFailing, phaseLost, phaseHinted, phaseLostFailing, phaseForgotten}
	livePhases = allPhases[:len(allPhases)-1]
	allRuns    = []run{runIdle, runProbing, runAgain}
	allOrigins = []origin{originAnnounced, originThrough, originStatic}
)

func (a action) String() string {
	var s []string
	for i := range numActions {
		if a&(1<<i) != 0 {
			s = append(s, actionNames[i])
		}
	}
	return strings.Join(s, ", ")
}

func names[T fmt.Stringer](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = x.String()
	}
	return strings.Join(s, ", ")
}

// render is a table as the package doc shows it, one line a row.
func render[S interface {
	~uint8
	fmt.Stringer
}](t []row[S]) []string {
	var out []string
	for _, r := range t {
		from, to := "any", r.to.String()
		if r.from != nil {
			from = names(r.from)
		}
		if r.same {
			to = "same"
		}
		line := from + " ─ " + names(r.on) + " ─► " + to
		if r.do != 0 {
			line += ": " + r.do.String()
		}
		out = append(out, line)
	}
	return out
}

// docSection is the package doc's section under heading, its comment
// markers stripped.
func docSection(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for l := range strings.SplitSeq(string(b), "\n") {
		l, ok := strings.CutPrefix(l, "//")
		if !ok {
			continue
		}
		if h, ok := strings.CutPrefix(l, " # "); ok {
			in = h == heading
			continue
		}
		if in {
			out = append(out, strings.TrimPrefix(l, " "))
		}
	}
	if len(out) == 0 {
		t.Fatalf("doc.go has no section %q", heading)
	}
	return out
}

// The package doc's transitions are step's tables, line for line and in
// order, and it names every state and every event (and nothing else).
func TestLifeDiagram(t *testing.T) {
	doc := docSection(t, "Per-server life")
	want := slices.Concat(render(phaseTable), render(runTable), render(originTable))
	var got []string
	defined := map[string]bool{}
	def := regexp.MustCompile(`^\t([a-z-]+) {2,}\S`)
	for _, l := range doc {
		if strings.Contains(l, " ─► ") {
			got = append(got, strings.TrimPrefix(l, "\t"))
		}
		if m := def.FindStringSubmatch(l); m != nil {
			defined[m[1]] = true
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("doc.go's transitions differ from the tables; the tables render as:\n\t%s\ndoc.go has:\n\t%s",
			strings.Join(want, "\n\t"), strings.Join(got, "\n\t"))
	}
	wantDefined := map[string]bool{}
	for _, n := range slices.Concat(phaseNames[:], runNames[:], originNames[:], eventNames[:evConnected]) {
		wantDefined[n] = true
	}
	for n := range wantDefined {
		if !defined[n] {
			t.Errorf("the package doc does not describe %q", n)
		}
	}
	for n := range defined {
		if !wantDefined[n] {
			t.Errorf("the package doc describes %q, which is no state or event", n)
		}
	}
	// The events only the identity changes on are in its section.
	id := strings.Join(docSection(t, "Identity: proof and claims"), "\n")
	for _, n := range eventNames[evConnected:] {
		if !strings.Contains(id, n) {
			t.Errorf("the identity section does not name %q", n)
		}
	}
}

// Each table is a function: at most one line for a state and an event.
func TestLifeTablesAreFunctions(t *testing.T) {
	check := func(name string, n int, match func(i, k int) []int) {
		for s := range n {
			for k := range int(numEvents) {
				if rows := match(s, k); len(rows) > 1 {
					t.Errorf("%s table: rows %v both match state %d on %s", name, rows, s, evKind(k))
				}
			}
		}
	}
	check("phase", len(livePhases), func(s, k int) []int { return matching(phaseTable, phase(s), evKind(k)) })
	check("run", len(allRuns), func(s, k int) []int { return matching(runTable, run(s), evKind(k)) })
	check("origin", len(allOrigins), func(s, k int) []int { return matching(originTable, origin(s), evKind(k)) })
	for _, r := range phaseTable {
		if slices.Contains(r.from, phaseForgotten) {
			t.Errorf("a line leaves forgotten: %+v", r)
		}
	}
	// apply makes one report and arms one timer at most.
	reports, timers := actListed|actUnlistable|actLost, actRelist|actRetry|actRetryFrom1
	for _, ph := range livePhases {
		for _, r := range allRuns {
			for _, o := range allOrigins {
				for k := range numEvents {
					_, do := step(life{phase: ph, run: r, origin: o, id: ident{guid: pva.GUID{1}, claim: pva.GUID{2}}}, event{kind: k, guid: pva.GUID{3}})
					if bits.OnesCount16(uint16(do&reports)) > 1 || bits.OnesCount16(uint16(do&timers)) > 1 {
						t.Errorf("%s, %s, %s on %s: %q", ph, r, o, k, do)
					}
				}
			}
		}
	}
}

func matching[S ~uint8](t []row[S], s S, k evKind) []int {
	var out []int
	for i, r := range t {
		if (r.from == nil || slices.Contains(r.from, s)) && slices.Contains(r.on, k) {
			out = append(out, i)
		}
	}
	return out
}

func TestLifeTransitions(t *testing.T) {
	g, f := pva.GUID{0x60}, pva.GUID{0xF0}
	at := func(ph phase, r run) life { return life{phase: ph, run: r, id: ident{guid: g}} }
	cases := []struct {
		name string
		from life
		e    event
		want life
		do   action
	}{
		{"first listing", at(phaseNew, runProbing), event{kind: evLists}, at(phaseListed, runProbing), actListed | actRelist},
		{"re-listing", at(phaseListed, runProbing), event{kind: evLists}, at(phaseListed, runProbing), actListed | actRelist},
		{"refused", at(phaseNew, runProbing), event{kind: evRefuses}, at(phaseRefused, runProbing), actUnlistable | actRetry},
		{"first failure reported", at(phaseNew, runProbing), event{kind: evFails}, at(phaseFailing, runProbing), actUnlistable | actRetry},
		{"later failures quiet", at(phaseFailing, runProbing), event{kind: evFails}, at(phaseFailing, runProbing), actRetry},
		{"listed, then a failure: names stay", at(phaseListed, runProbing), event{kind: evFails}, at(phaseFailing, runProbing), actRetry},
		{"refused, then a failure", at(phaseRefused, runProbing), event{kind: evFails}, at(phaseFailing, runProbing), actRetry},
		{"watch ends while idle", at(phaseListed, runIdle), event{kind: evWatchEnds}, at(phaseLost, runIdle), actLost | actRetryFrom1},
		{"watch ends while probing", at(phaseListed, runProbing), event{kind: evWatchEnds}, at(phaseLost, runProbing), actLost},
		{"watch ends, nothing reported", at(phaseNew, runProbing), event{kind: evWatchEnds}, at(phaseNew, runProbing), 0},
		{"lost: failures quiet", at(phaseLost, runProbing), event{kind: evFails}, at(phaseLost, runProbing), actRetry},
		{"lost, then a beacon", at(phaseLost, runIdle), event{kind: evAnnounce, guid: g}, at(phaseHinted, runIdle), 0},
		{"lost, then a search reply", at(phaseLost, runIdle), event{kind: evReply, guid: g}, at(phaseHinted, runIdle), 0},
		{"hinted, then a failure reported", at(phaseHinted, runProbing), event{kind: evFails}, at(phaseLostFailing, runProbing), actUnlistable | actRetry},
		{"lost-failing: failures quiet", at(phaseLostFailing, runProbing), event{kind: evFails}, at(phaseLostFailing, runProbing), actRetry},
		{"lost-failing: a beacon changes nothing", at(phaseLostFailing, runIdle), event{kind: evAnnounce, guid: g}, at(phaseLostFailing, runIdle), 0},
		{"lost-failing lost again", at(phaseLostFailing, runProbing), event{kind: evRestarted}, at(phaseLost, runProbing), actLost},
		{"lost, then refused: answered", at(phaseLost, runProbing), event{kind: evRefuses}, at(phaseRefused, runProbing), actUnlistable | actRetry},
		{"lost-failing, then listed", at(phaseLostFailing, runProbing), event{kind: evLists}, at(phaseListed, runProbing), actListed | actRelist},
		{"refuted while listed", at(phaseListed, runProbing), event{kind: evRefuted}, at(phaseListed, runProbing), actRelist},
		{"refuted while failing", at(phaseFailing, runProbing), event{kind: evRefuted}, at(phaseFailing, runProbing), actRetry},
		{"refuted before anything", at(phaseNew, runProbing), event{kind: evRefuted}, at(phaseNew, runProbing), 0},
		{"dropped with names", at(phaseListed, runIdle), event{kind: evDrop}, at(phaseForgotten, runIdle), actLost | actForget},
		{"dropped unreported", at(phaseNew, runProbing), event{kind: evDrop}, at(phaseForgotten, runProbing), actForget},
		{"dropped after the loss", at(phaseLost, runIdle), event{kind: evDrop}, at(phaseForgotten, runIdle), actForget},
		{"forgotten", at(phaseListed, runIdle), event{kind: evForget}, at(phaseForgotten, runIdle), actForget},
		{"start", at(phaseListed, runIdle), event{kind: evStart}, at(phaseListed, runProbing), actStopTimer | actSpawn},
		{"start while probing", at(phaseListed, runProbing), event{kind: evStart}, at(phaseListed, runAgain), 0},
		{"start while asked again", at(phaseListed, runAgain), event{kind: evStart}, at(phaseListed, runAgain), 0},
		{"settled", at(phaseListed, runProbing), event{kind: evSettled}, at(phaseListed, runIdle), 0},
		{"settled, asked again", at(phaseListed, runAgain), event{kind: evSettled}, at(phaseListed, runProbing), actStopTimer | actLoop},
		{"through, then a beacon", life{origin: originThrough}, event{kind: evAnnounce}, life{}, 0},
		{"through, then a reply", life{origin: originThrough}, event{kind: evReply}, life{origin: originThrough}, 0},
		{"through, then the static list", life{origin: originThrough}, event{kind: evAddStatic}, life{origin: originStatic}, 0},
		{"announced, then the static list", life{}, event{kind: evAddStatic}, life{origin: originStatic}, 0},
		{"static, then a reply", life{origin: originStatic}, event{kind: evReply}, life{origin: originStatic}, 0},
		{"static, then a beacon", life{origin: originStatic}, event{kind: evAnnounce}, life{origin: originStatic}, 0},
		{"off the static list", life{origin: originStatic}, event{kind: evDropStatic}, life{}, 0},
		{"the first claim names it", life{}, event{kind: evAnnounce, guid: g}, at(phaseNew, runIdle), 0},
		{"a claim against a known GUID", at(phaseListed, runIdle), event{kind: evAnnounce, guid: f},
			life{phase: phaseListed, id: ident{guid: g, claim: f}}, actClaimed},
	}
	for _, c := range cases {
		got, do := step(c.from, c.e)
		if got != c.want || do != c.do {
			t.Errorf("%s: %+v on %s: %+v, %q; want %+v, %q", c.name, c.from, c.e.kind, got, do, c.want, c.do)
		}
	}
	// Forgotten is the end, whatever happens.
	for k := range numEvents {
		for _, ok := range []bool{false, true} {
			l := life{phase: phaseForgotten, run: runProbing, origin: originThrough, id: ident{guid: g}}
			if got, do := step(l, event{kind: k, guid: f, ok: ok}); got != l || do != 0 {
				t.Errorf("forgotten, then %s: %+v, %q", k, got, do)
			}
		}
	}
}

// Beyond the static list, only a TCP exchange proves a server: a listing,
// a listing refused on a live connection, or a watch up (which the
// Prober reads from the connection, not from the life). No event but
// lists, refuses or add-static makes an unproven life proven.
func TestOnlyTCPProves(t *testing.T) {
	proving := []evKind{evLists, evRefuses, evAddStatic}
	for _, ph := range livePhases {
		for _, r := range allRuns {
			for _, o := range []origin{originAnnounced, originThrough} {
				for k := range numEvents {
					for _, ok := range []bool{false, true} {
						l := life{phase: ph, run: r, origin: o, id: ident{guid: pva.GUID{1}}}
						if l.proven(false, 0) {
							continue
						}
						next, _ := step(l, event{kind: k, guid: pva.GUID{2}, ok: ok})
						if next.proven(false, 0) != slices.Contains(proving, k) {
							t.Errorf("%+v on %s: proven %v", l, k, next.proven(false, 0))
						}
					}
				}
			}
		}
	}
	for _, ph := range []phase{phaseNew, phaseFailing, phaseLost, phaseHinted, phaseLostFailing} {
		l := life{phase: ph}
		if l.proven(false, 0) {
			t.Errorf("%s with no watch and no names is proven", ph)
		}
		if !l.proven(true, 0) || !l.proven(false, 1) {
			t.Errorf("%s with a live watch or listed names is not proven", ph)
		}
	}
}

// ForgetUnproven never forgets a static server, a listed (or refused)
// one, one with listed names, one watched now, or one known under another
// GUID; it forgets what only hints and failures made.
func TestForgetUnprovenSparesProven(t *testing.T) {
	g := pva.GUID{0x60}
	cases := []struct {
		name    string
		s       server
		forgets bool
	}{
		{"new", server{}, true},
		{"failing", server{life: life{phase: phaseFailing}}, true},
		{"failing, a search-through endpoint", server{life: life{phase: phaseFailing, origin: originThrough}}, true},
		{"lost", server{life: life{phase: phaseLost}}, true},
		{"hinted", server{life: life{phase: phaseHinted}}, true},
		{"lost-failing", server{life: life{phase: phaseLostFailing}}, true},
		{"listed", server{life: life{phase: phaseListed}}, false},
		{"refused", server{life: life{phase: phaseRefused}}, false},
		{"failing, its names listed", server{life: life{phase: phaseFailing}, names: 3}, false},
		{"failing, watched", server{life: life{phase: phaseFailing}, cl: &client{}}, false},
		{"lost, watched again", server{life: life{phase: phaseLost, run: runProbing}, cl: &client{}}, false},
		{"under another GUID", server{life: life{phase: phaseFailing, id: ident{guid: pva.GUID{0xF0}}}}, false},
	}
	for _, ph := range livePhases {
		cases = append(cases, struct {
			name    string
			s       server
			forgets bool
		}{"static, " + ph.String(), server{life: life{phase: ph, origin: originStatic}}, false})
	}
	for _, c := range cases {
		p := newProber(t, Options{})
		ep := netip.MustParseAddrPort("127.0.0.1:1")
		s := c.s
		s.ep = ep
		if s.life.id.guid.IsZero() {
			s.life.id.guid = g
		}
		if s.life.origin == originThrough {
			p.through++
		}
		p.mu.Lock()
		p.servers[ep] = &s
		p.mu.Unlock()
		if got := p.ForgetUnproven(ep, g); got != c.forgets {
			t.Errorf("%s: ForgetUnproven %v, want %v", c.name, got, c.forgets)
		}
		p.mu.Lock()
		_, kept := p.servers[ep]
		p.mu.Unlock()
		if kept == c.forgets || c.forgets && p.Proven(ep) {
			t.Errorf("%s: still known %v, proven %v after ForgetUnproven", c.name, kept, p.Proven(ep))
		}
		if st := p.Stats(); st.Through != 0 && c.forgets {
			t.Errorf("%s: %d search-through endpoints counted after it was forgotten", c.name, st.Through)
		}
		p.mu.Lock()
		s.cl = nil // no connection behind it for Close to close
		p.mu.Unlock()
	}
}

// A GUID a hint claims never takes over a server proven under another:
// only the endpoint's own answer over TCP does, or, once the server known
// was proven gone (closed by the server, connection refused), a
// connection that holds. Every sequence of three events that has neither
// leaves the GUID (under which Listed, Unlistable and Lost report) as it
// was.
func TestForgedGUIDNeverReattributes(t *testing.T) {
	g, f := pva.GUID{0x60}, pva.GUID{0xF0}
	forged := []event{
		{kind: evAnnounce, guid: f}, {kind: evReply, guid: f}, {kind: evAddStatic, guid: f},
		{kind: evConnected}, {kind: evConnected, ok: true}, {kind: evConnected, guid: g, ok: true},
		{kind: evWatchEnds}, {kind: evRefuted}, {kind: evStart}, {kind: evSettled}, {kind: evFails},
		{kind: evLists}, {kind: evRefuses}, {kind: evRestarted},
	}
	var walk func(l life, depth int, path []string)
	walk = func(l life, depth int, path []string) {
		if l.id.guid != g {
			t.Fatalf("%v: the GUID became %v", path, l.id.guid)
		}
		if depth == 0 {
			return
		}
		for _, e := range forged {
			next, _ := step(l, e)
			walk(next, depth-1, append(path[:len(path):len(path)], fmt.Sprintf("%s(%v,%v)", e.kind, e.guid, e.ok)))
		}
	}
	for _, ph := range livePhases {
		walk(life{phase: ph, id: ident{guid: g}}, 3, nil)
	}

	// And what does take it over.
	claimed := ident{guid: g, claim: f}
	gone := ident{guid: g, claim: f, gone: true}
	cases := []struct {
		name string
		id   ident
		e    event
		want ident
	}{
		{"its own answer", claimed, event{kind: evConnected, guid: f, ok: true}, ident{guid: f}},
		{"another answer", claimed, event{kind: evConnected, guid: pva.GUID{0x77}}, ident{guid: pva.GUID{0x77}}},
		{"no answer", claimed, event{kind: evConnected, ok: true}, ident{guid: g}},
		{"no answer, the old one gone", gone, event{kind: evConnected, ok: true}, ident{guid: f}},
		{"no answer, gone, the connection failed", gone, event{kind: evConnected}, ident{guid: g, gone: true}},
		{"the answer of the server known", gone, event{kind: evConnected, guid: g}, ident{guid: g}},
		{"watch silent", claimed, event{kind: evWatchEnds}, ident{guid: g}},
		{"watch closed by the server", claimed, event{kind: evWatchEnds, ok: true}, ident{guid: g, gone: true}},
		{"connection refused", claimed, event{kind: evConnRefused}, gone},
		{"confirmed", gone, event{kind: evConfirmed, guid: f}, ident{guid: f}},
	}
	for _, c := range cases {
		if got, _ := c.id.step(c.e); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}

	// A restart claim's check: refuted (zero) unless proven.
	verdicts := []struct {
		name   string
		id     ident
		answer pva.GUID
		usable bool
		want   pva.GUID
	}{
		{"the watched server answers", claimed, g, true, pva.GUID{}},
		{"no answer", claimed, pva.GUID{}, true, pva.GUID{}},
		{"no answer, the old one gone", gone, pva.GUID{}, true, f},
		{"no answer, gone, connection failed", gone, pva.GUID{}, false, pva.GUID{}},
		{"another answer", claimed, f, true, f},
		{"an answer on a failed listing", claimed, f, false, f},
	}
	for _, v := range verdicts {
		if got := v.id.verdict(v.answer, v.usable); got != v.want {
			t.Errorf("verdict, %s: %v, want %v", v.name, got, v.want)
		}
	}
}

func TestLifeState(t *testing.T) {
	cases := []struct {
		l       life
		watched bool
		want    State
	}{
		{life{}, false, StateIdle},
		{life{run: runProbing, phase: phaseListed}, true, StateProbing},
		{life{run: runAgain}, false, StateProbing},
		{life{phase: phaseListed}, true, StateListed},
		{life{phase: phaseRefused}, false, StateUnlistable},
		{life{phase: phaseFailing}, true, StateUnlistable}, // the listing timed out on a live connection
		{life{phase: phaseFailing}, false, StateFailed},
		{life{phase: phaseLost}, false, StateFailed},
		{life{phase: phaseHinted}, false, StateFailed},
		{life{phase: phaseLostFailing}, true, StateUnlistable},
	}
	for _, c := range cases {
		if got := c.l.state(c.watched); got != c.want {
			t.Errorf("%+v watched %v: %s, want %s", c.l, c.watched, got, c.want)
		}
	}
	for _, ph := range livePhases {
		l := life{phase: ph}
		if l.unanswered() != (ph == phaseLost || ph == phaseHinted || ph == phaseLostFailing) {
			t.Errorf("%s: unanswered %v", ph, l.unanswered())
		}
	}
}
