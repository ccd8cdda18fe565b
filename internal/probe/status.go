package probe

import (
	"net/netip"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
)

// State is the operator's view of where the prober is with a server:
// the package doc's run and phase, folded (life.state).
type State uint8

// States.
const (
	StateIdle State = iota
	StateProbing
	StateListed     // listed, watching
	StateUnlistable // connected but listing failed, watching
	StateFailed     // not connected; retrying
)

var stateNames = [...]string{"idle", "probing", "listed", "unlistable", "failed"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "invalid"
}

// ServerStatus is the prober's view of one server, for operators.
type ServerStatus struct {
	Endpoint    netip.AddrPort
	GUID        pva.GUID
	Static      bool
	State       State
	Connected   bool
	Names       int
	ListedAt    time.Time
	Failures    int
	LastError   string
	NextAttempt time.Time // zero if none scheduled
	Info        Info
	TLS         bool // the watch connection is over TLS
}

// Stats are counters since New.
type Stats struct {
	Probes          uint64 // connect-and-list attempts (including re-listings)
	Listed          uint64
	Unlistable      uint64
	ConnectFailures uint64
	Lost            uint64
	// Verifications are hints of a new GUID at an endpoint whose server
	// is watched, checked over a fresh TCP connection: confirmed (the
	// endpoint answers with another GUID, or the old watch died and the
	// endpoint answers) or refuted (the old server still answers).
	VerifyConfirmed uint64
	VerifyRefuted   uint64
	// HintsDeferred are hint-triggered probe requests folded into the
	// next backoff step instead of probing at once (for a watched server
	// that would not list: into its next scheduled retry).
	HintsDeferred uint64
	// PingsOverUDP are discovery pings answered over UDP (pvAccessCPP),
	// each proving the GUID of the server pinged.
	PingsOverUDP uint64
	// ThroughForgotten are endpoints known only from search replies
	// forgotten after their retry budget; ThroughDropped, replies naming
	// a new such endpoint not taken because MaxThrough were known.
	ThroughForgotten uint64
	ThroughDropped   uint64
	// TLSFallbacks are fresh connections to a server's known TLS
	// endpoint that failed (refused, untrusted, another GUID there),
	// the server then being connected to over plain TCP.
	TLSFallbacks uint64
	// Waiting are probes (and confirmations) waiting for a slot of the
	// pool; Throttled counts those that waited although a slot was free,
	// because their host held its share or retries held theirs.
	Waiting   int
	Throttled uint64
	Servers   int
	Through   int // of Servers, known only from search replies
	Watching  int
	// WatchingTLS: of Watching, the watches over TLS.
	WatchingTLS int
}

// proven: see life.proven. p.mu held.
func (s *server) proven() bool {
	return s.life.proven(s.watched(), s.names)
}

// Proven reports whether the prober holds ep as proven (static, listed,
// or shown over TCP and not lost since).
func (p *Prober) Proven(ep netip.AddrPort) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.servers[ep]
	return s != nil && s.proven()
}

// Servers returns the status of every server, in no particular order.
func (p *Prober) Servers() []ServerStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ServerStatus, 0, len(p.servers))
	for _, s := range p.servers {
		out = append(out, ServerStatus{Endpoint: s.ep, GUID: s.life.id.guid, Static: s.life.origin == originStatic, State: s.life.state(s.watched()),
			Connected: s.cl != nil, Names: s.names, ListedAt: s.listedAt, Failures: s.failures,
			LastError: s.lastErr, NextAttempt: s.next, Info: s.info, TLS: s.cl != nil && s.cl.overTLS})
	}
	return out
}

// Watching reports whether a watch connection to ep is up, and the GUID
// it watches.
func (p *Prober) Watching(ep netip.AddrPort) (pva.GUID, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.servers[ep]
	if s == nil || !s.watched() {
		return pva.GUID{}, false
	}
	return s.reportGUID(), true
}

// Refuses reports whether ep's server answered over TCP but would not
// list (unlistable): a row made for it after that report (a search-through
// confirmation that finished later) takes the state from here.
func (p *Prober) Refuses(ep netip.AddrPort) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.servers[ep]
	return s != nil && s.life.phase == phaseRefused
}

// Gone reports whether ep's server was reported lost and has not answered
// over TCP since (no listing; a beacon, which anyone can forge, does not
// count). A check
// that finished after the loss (a search-through confirmation) must not
// register names for it: nothing would remove them.
func (p *Prober) Gone(ep netip.AddrPort) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.servers[ep]
	return s != nil && s.life.unanswered()
}

// Stats returns the counters.
func (p *Prober) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	ss := p.sched.stats()
	st.Waiting, st.Throttled = ss.waiting, ss.throttled
	st.Servers, st.Through = len(p.servers), p.through
	for _, s := range p.servers {
		if s.cl != nil {
			st.Watching++
			if s.cl.overTLS {
				st.WatchingTLS++
			}
		}
	}
	return st
}
