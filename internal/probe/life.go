package probe

import (
	"slices"

	"github.com/pvans-project/pvans/internal/pva"
)

// life is where the prober is with one server, in the four parts of the
// package doc's "Per-server life". Only step changes it; the Prober
// carries out the actions step returns (apply).
type life struct {
	phase  phase
	run    run
	origin origin
	id     ident
}

// phase is what the Sink was told about the server, and whether the
// endpoint answered over TCP since.
type phase uint8

const (
	phaseNew phase = iota
	phaseListed
	phaseRefused
	phaseFailing
	phaseLost
	phaseHinted
	phaseLostFailing
	phaseForgotten
)

var phaseNames = [...]string{"new", "listed", "refused", "failing", "lost", "hinted", "lost-failing", "forgotten"}

func (p phase) String() string { return phaseNames[p] }

// run is the probe's hold on the server (queued for a slot, or running).
type run uint8

const (
	runIdle run = iota
	runProbing
	runAgain
)

var runNames = [...]string{"idle", "probing", "again"}

func (r run) String() string { return runNames[r] }

// origin is who named the server. The zero value is announced: a server
// is taken to be one of the site's until something says otherwise.
type origin uint8

const (
	originAnnounced origin = iota
	originThrough
	originStatic
)

var originNames = [...]string{"announced", "through", "static"}

func (o origin) String() string { return originNames[o] }

// ident is who the server at the endpoint is (the package doc's
// "Identity: proof and claims").
type ident struct {
	guid  pva.GUID // proven last over TCP, or the first claim; zero: none yet
	claim pva.GUID // another GUID a hint claimed, to be proven; zero: none
	// gone: the endpoint proved guid's server gone (its watch closed by
	// the server, or a connection refused) and nothing has proved who is
	// there since; the next claim may then be taken without a ping answer.
	// A fact of its own beside the phase: a watch that went silent is a
	// loss (the phase) but no proof of who is there.
	gone bool
}

// evKind is what happened to a server; eventNames are the package doc's
// names for them.
type evKind uint8

const (
	evAnnounce evKind = iota
	evReply
	evAddStatic
	evDropStatic
	evStart
	evLists
	evRefuses
	evFails
	evRefuted
	evRestarted
	evWatchEnds
	evSettled
	evDrop
	evForget
	// Only the identity changes on these.
	evConnected
	evConnRefused
	evConfirmed
	numEvents
)

var eventNames = [numEvents]string{"announce", "reply", "add-static", "drop-static", "start", "lists", "refuses",
	"fails", "refuted", "restarted", "watch-ends", "settled", "drop", "forget", "connected", "conn-refused", "confirmed"}

func (k evKind) String() string { return eventNames[k] }

// event is one thing that happened to a server. step reads kind, guid and
// ok; the rest is what the actions report.
type event struct {
	kind evKind
	// guid: the GUID a probe request claims (announce, reply, add-static),
	// the endpoint's answer to the ping (connected; zero: none), or the
	// GUID a restart check proved (confirmed).
	guid pva.GUID
	// ok: for connected, the attempt did not fail on its connection; for
	// watch-ends, the server closed the watch (not silence).
	ok bool

	names  []string // Listed
	info   Info     // Listed
	err    error    // Unlistable
	reason string   // Lost
}

// action is a set of things for the Prober to do, named in the package
// doc in this order. One event asks for one report at most, and one timer
// at most.
type action uint16

const (
	actStopTimer action = 1 << iota
	actSpawn
	actLoop // the running goroutine probes once more
	actListed
	actUnlistable
	actLost
	actRelist
	actRetry
	actRetryFrom1 // the failures start over at one, then retry
	actForget
	actClaimed // a new claim: the next probe queues with fresh ones
	numActions = iota
)

var actionNames = [numActions]string{"stop timer", "spawn", "probe again", "Listed", "Unlistable", "Lost",
	"re-list", "retry", "retry from 1", "forget", "claimed"}

// row is one line of a part's table: a state in from (nil: any state but
// forgotten), on an event in on, goes to to (or stays, same) and does do.
type row[S ~uint8] struct {
	from []S
	on   []evKind
	to   S
	same bool
	do   action
}

// reported are the phases that owe a Lost: a Listed or Unlistable is
// outstanding.
var reported = []phase{phaseListed, phaseRefused, phaseFailing, phaseLostFailing}

var phaseTable = []row[phase]{
	{on: []evKind{evLists}, to: phaseListed, do: actListed | actRelist},
	{on: []evKind{evRefuses}, to: phaseRefused, do: actUnlistable | actRetry},
	// The first failure since the server was named (or since a sign of
	// life after its loss) lets the registry fall back to search-through.
	{from: []phase{phaseNew}, on: []evKind{evFails}, to: phaseFailing, do: actUnlistable | actRetry},
	{from: []phase{phaseHinted}, on: []evKind{evFails}, to: phaseLostFailing, do: actUnlistable | actRetry},
	{from: []phase{phaseListed, phaseRefused, phaseFailing}, on: []evKind{evFails}, to: phaseFailing, do: actRetry},
	{from: []phase{phaseLost, phaseLostFailing}, on: []evKind{evFails}, same: true, do: actRetry},
	// A request is a sign of life, not an answer: Gone stays.
	{from: []phase{phaseLost}, on: []evKind{evAnnounce, evReply, evAddStatic}, to: phaseHinted},
	{from: reported, on: []evKind{evWatchEnds, evRestarted}, to: phaseLost, do: actLost},
	// A refuted claim changed nothing: the timer the check replaced.
	{from: []phase{phaseListed}, on: []evKind{evRefuted}, same: true, do: actRelist},
	{from: []phase{phaseRefused, phaseFailing, phaseLost, phaseHinted, phaseLostFailing}, on: []evKind{evRefuted}, same: true, do: actRetry},
	{from: reported, on: []evKind{evDrop}, to: phaseForgotten, do: actLost | actForget},
	{from: []phase{phaseNew, phaseLost, phaseHinted}, on: []evKind{evDrop}, to: phaseForgotten, do: actForget},
	{on: []evKind{evForget}, to: phaseForgotten, do: actForget},
}

var runTable = []row[run]{
	{from: []run{runIdle}, on: []evKind{evStart}, to: runProbing, do: actStopTimer | actSpawn},
	{from: []run{runProbing, runAgain}, on: []evKind{evStart}, to: runAgain},
	{from: []run{runProbing}, on: []evKind{evSettled}, to: runIdle},
	{from: []run{runAgain}, on: []evKind{evSettled}, to: runProbing, do: actStopTimer | actLoop},
	// A watch that ends while an attempt runs is that attempt's outcome.
	{from: []run{runIdle}, on: []evKind{evWatchEnds}, same: true, do: actRetryFrom1},
}

var originTable = []row[origin]{
	{from: []origin{originThrough}, on: []evKind{evAnnounce}, to: originAnnounced},
	{from: []origin{originThrough, originAnnounced}, on: []evKind{evAddStatic}, to: originStatic},
	{from: []origin{originStatic}, on: []evKind{evDropStatic}, to: originAnnounced},
}

// lookup is s's line in t on k: the next state and the actions. No line:
// the same state, nothing to do.
func lookup[S ~uint8](t []row[S], s S, k evKind) (S, action) {
	for _, r := range t {
		if (r.from == nil || slices.Contains(r.from, s)) && slices.Contains(r.on, k) {
			if r.same {
				return s, r.do
			}
			return r.to, r.do
		}
	}
	return s, 0
}

// step is the one transition function of a server's life: pure, so that
// the tables (and the package doc, which shows them) are the behaviour.
func step(l life, e event) (life, action) {
	if l.phase == phaseForgotten {
		return l, 0
	}
	var do, a action
	l.phase, a = lookup(phaseTable, l.phase, e.kind)
	do |= a
	l.run, a = lookup(runTable, l.run, e.kind)
	do |= a
	l.origin, a = lookup(originTable, l.origin, e.kind)
	do |= a
	l.id, a = l.id.step(e)
	return l, do | a
}

// step is the identity part of a server's step: a hint's GUID is only a
// claim; the endpoint's own answer over TCP decides.
func (id ident) step(e event) (ident, action) {
	switch e.kind {
	case evAnnounce, evReply, evAddStatic:
		switch {
		case e.guid.IsZero() || e.guid == id.guid:
		case id.guid.IsZero():
			id.guid = e.guid // the first claim names a server never seen
		default:
			id.claim = e.guid
			return id, actClaimed
		}
	case evConnected:
		// Without a ping answer, a claim is no proof: the GUID proven
		// last stays, unless the server it names was proven gone.
		switch {
		case !e.guid.IsZero():
			id.guid, id.gone = e.guid, false
		case !id.claim.IsZero() && id.gone && e.ok:
			id.guid, id.gone = id.claim, false
		}
		id.claim = pva.GUID{}
	case evConnRefused:
		id.gone = true
	case evWatchEnds:
		// A claim made against a live server is no hint about whoever
		// answers next; only the server closing the watch proves it gone.
		id.claim = pva.GUID{}
		if e.ok {
			id.gone = true
		}
	case evRefuted:
		id.claim = pva.GUID{}
	case evConfirmed:
		id = ident{guid: e.guid}
	}
	return id, 0
}

// verdict decides a restart claim from its check on a connection of its
// own: the GUID it proves, zero if refuted. The endpoint's answer over TCP
// decides; with none, the claim stands only if the server known was
// proven gone (a connection alive now is to whoever came after it) and
// the check's connection held (usable). An answer with the GUID watched
// refutes it.
func (id ident) verdict(answer pva.GUID, usable bool) pva.GUID {
	if answer.IsZero() && usable && id.gone {
		answer = id.claim
	}
	if answer == id.guid {
		return pva.GUID{}
	}
	return answer
}

// proven: the server is static, or showed itself over TCP and has not been
// lost since: listed (names still reported), a connection that refused
// the listing, or a watch up now (watched). A probe that only failed to
// connect is no proof.
func (l life) proven(watched bool, names int) bool {
	return l.origin == originStatic || watched || names > 0 || l.phase == phaseListed || l.phase == phaseRefused
}

// unanswered: Lost was reported and the endpoint has not answered over
// TCP since. No request changes that: a forged beacon must not make a dead
// server's late confirmation count (Gone).
func (l life) unanswered() bool {
	return l.phase == phaseLost || l.phase == phaseHinted || l.phase == phaseLostFailing
}

// state is the operator's view of l (State); watched: a watch is up.
func (l life) state(watched bool) State {
	switch {
	case l.run != runIdle:
		return StateProbing
	case l.phase == phaseNew:
		return StateIdle
	case l.phase == phaseListed:
		return StateListed
	case l.phase == phaseRefused, watched:
		return StateUnlistable
	}
	return StateFailed
}

// event is the life event of a probe request for r.
func (r Reason) event() evKind {
	switch r {
	case ReasonSearchThrough:
		return evReply
	case ReasonStatic:
		return evAddStatic
	}
	return evAnnounce
}
