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

// Stats are the prober's gauges (its counters are in metrics.go).
type Stats struct {
	// Waiting are probes (and confirmations) waiting for a slot of the
	// pool.
	Waiting  int
	Servers  int
	Through  int // of Servers, known only from search replies
	Watching int
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

// Stats returns the gauges now.
func (p *Prober) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Stats{Waiting: p.sched.stats().waiting, Servers: len(p.servers), Through: p.through}
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
