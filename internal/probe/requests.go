package probe

import (
	"net/netip"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/pva"
)

// Probe asks for a server to be listed (or re-listed). guid is what the
// request claims; the endpoint's own answer over TCP (the discovery ping
// on a fresh connection) decides. A GUID different from the one being
// watched is a restart claim: it is verified over a fresh connection while
// the old watch stays, and only a confirmed restart replaces the old
// server (reported as Listed under the new GUID; the registry's Listed
// drops the old one). Requests from hints (Reason.hint) cost at most one
// probe per backoff step per endpoint, however many datagrams arrive.
func (p *Prober) Probe(guid pva.GUID, ep netip.AddrPort, why Reason) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	s := p.servers[ep]
	if s == nil {
		through := why == ReasonSearchThrough
		if mt := p.tm.Load().maxThrough; through && mt > 0 && p.through >= mt {
			p.stats.ThroughDropped.Add(1)
			p.mu.Unlock()
			p.full.Hit("through", "search-through endpoints at their bound (probe.DefaultMaxThrough): new ones are not probed",
				zap.Int("bound", p.tm.Load().maxThrough))
			return
		}
		s = &server{ep: ep}
		if through {
			s.life.origin = originThrough
			p.through++
		}
		p.servers[ep] = s
	}
	p.apply(s, event{kind: why.event(), guid: guid})
	p.log.Debug("probe requested", zap.Stringer("endpoint", ep), zap.Stringer("guid", guid), zap.Uint8("reason", uint8(why)))
	switch {
	case why.hint() && why != ReasonSourcesChanged && s.life.phase == phaseRefused && s.watched() && s.life.id.claim.IsZero():
		// It would not list, its watch is up and nothing new is claimed:
		// the hint (a discovery reply, a search-through answer) waits for
		// the unlistable schedule, not one attempt per backoff step.
		p.stats.HintsDeferred.Add(1)
	case why.hint():
		p.hintLocked(s)
	default:
		p.kick(s)
	}
	p.mu.Unlock()
	p.deliver()
}

// hintLocked probes s now if its hint step allows, or once at the end of
// the step, however many hints arrive meanwhile. A hint after a quiet step
// starts the steps over.
func (p *Prober) hintLocked(s *server) {
	if s.hintTimer != nil {
		p.stats.HintsDeferred.Add(1)
		return
	}
	now := p.opt.Clock.Now()
	if now.Before(s.hintOK) {
		p.stats.HintsDeferred.Add(1)
		s.hintTimer = p.opt.Clock.AfterFunc(s.hintOK.Sub(now), func() {
			p.mu.Lock()
			if s.hintTimer != nil && s.life.phase != phaseForgotten && !p.closed {
				s.hintTimer = nil
				p.hintKickLocked(s, p.opt.Clock.Now())
			}
			p.mu.Unlock()
		})
		return
	}
	if !s.hintOK.IsZero() && !now.Before(s.hintOK.Add(p.tm.Load().backoff.Delay(s.hintSteps, 0.5))) {
		s.hintSteps = 0
	}
	p.hintKickLocked(s, now)
}

func (p *Prober) hintKickLocked(s *server, now time.Time) {
	s.hintSteps++
	s.hintOK = now.Add(p.tm.Load().backoff.Delay(s.hintSteps, p.rnd.Float64()))
	p.kick(s)
}

// Forget stops probing and watching ep and closes its connection, without
// a report: the caller (beacon expiry, static list change) removes the
// server itself.
func (p *Prober) Forget(ep netip.AddrPort) {
	p.mu.Lock()
	if s := p.servers[ep]; s != nil {
		p.apply(s, event{kind: evForget})
	}
	p.mu.Unlock()
}

// forgetLocked ends s's goroutine, timers and watch (the forget action).
func (p *Prober) forgetLocked(s *server) {
	if s.cancel != nil {
		s.cancel()
	}
	if s.wait != nil && p.sched.cancel(s.wait) {
		p.wg.Done() // its goroutine never starts
	}
	s.wait = nil
	p.stopTimer(s)
	if s.hintTimer != nil {
		s.hintTimer.Stop()
	}
	if s.cl != nil {
		s.cl.conn.Close()
		s.cl = nil
	}
	delete(p.servers, s.ep)
}

// ForgetUnproven forgets ep's server only if nothing proved it over TCP
// (proven) and it is known under guid (or under no GUID yet). Checked under the prober's
// lock, so a listing that lands meanwhile is never forgotten. It reports
// whether ep is now unknown to the prober.
func (p *Prober) ForgetUnproven(ep netip.AddrPort, guid pva.GUID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.servers[ep]
	if s == nil {
		return true
	}
	if s.proven() || (!s.life.id.guid.IsZero() && s.life.id.guid != guid) {
		return false
	}
	p.apply(s, event{kind: evForget})
	return true
}

// SetStatic replaces the list of static servers: endpoints probed (and
// watched, and reconnected) even if they never beacon. Endpoints no longer
// listed are forgotten unless a beacon also announced them.
func (p *Prober) SetStatic(eps []netip.AddrPort) {
	want := make(map[netip.AddrPort]bool, len(eps))
	for _, ep := range eps {
		want[ep] = true
	}
	p.mu.Lock()
	for ep, s := range p.servers {
		if s.life.origin == originStatic && !want[ep] {
			p.apply(s, event{kind: evDropStatic})
			if g := s.life.id.guid; g.IsZero() || g == StaticGUID(ep) {
				// Nothing else announced it: it goes, and its names with
				// it (a Lost is owed for a listing; forgetting alone would
				// close the watch that removes them).
				p.apply(s, event{kind: evDrop, reason: "taken off the static list"})
			}
		}
	}
	var add []netip.AddrPort
	for ep := range want {
		if s := p.servers[ep]; s == nil || s.life.origin != originStatic {
			add = append(add, ep)
		}
	}
	p.mu.Unlock()
	p.deliver()
	for _, ep := range add {
		p.Probe(pva.GUID{}, ep, ReasonStatic)
	}
}
