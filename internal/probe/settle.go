package probe

import (
	"errors"
	"syscall"

	"go.uber.org/zap"
)

// settle records an attempt's outcome, reports it and schedules what comes
// next, as the events of the server's life. It reports whether the
// goroutine should probe again at once.
func (p *Prober) settle(s *server, o outcome) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o.upgrade != nil {
		defer func() {
			if !o.upgrade.established {
				o.upgrade.conn.Close()
			}
		}()
	}
	if s.life.phase == phaseForgotten || p.closed {
		if o.verify && o.cl != nil && o.cl.conn != nil {
			o.cl.conn.Close()
		}
		return false
	}
	if s.cl != nil && s.cl.dead.Load() {
		// The watch closed and its connClosed waits for the lock: the
		// watch's end comes first, as if connClosed had had the lock
		// first. Dropping it as one more failure of this attempt would
		// leave connClosed nothing to report, and the names registered.
		p.watchEnded(s, s.cl.closeErr)
	}
	// o.cl's close is read once: when it closes after this reading, its
	// connClosed waits for the lock and finds the watch this settle
	// leaves, so the close is never lost between two readings.
	o.closed = o.cl != nil && o.cl.dead.Load()
	if o.connErr == nil && o.listErr == nil && o.cl != nil && (o.closed || !o.verify && s.cl != o.cl) {
		// The connection closed between the listing and now: nothing
		// watches the names, so they are not reported (a static server
		// would otherwise keep them for ever).
		o.connErr = errConnLost
	}
	if o.verify && !o.superseded && !p.settleClaim(s, &o) {
		return p.finish(s)
	}
	if !o.verify && !o.superseded && o.cl != nil {
		// The endpoint's own answer on a fresh connection names the server.
		p.apply(s, event{kind: evConnected, guid: o.tcpGUID, ok: o.connErr == nil})
	}
	if errors.Is(o.connErr, syscall.ECONNREFUSED) {
		p.apply(s, event{kind: evConnRefused})
	}
	guid, ep := s.reportGUID(), s.ep
	if !o.superseded {
		p.observe(o)
	}
	switch {
	case o.superseded:
	case o.connErr != nil:
		s.failures++
		s.lastErr = o.connErr.Error()
		p.stats.ConnectFailures.Add(1)
		p.apply(s, event{kind: evFails, err: o.connErr})
		p.log.Debug("probe failed", zap.Stringer("endpoint", ep), zap.Int("failures", s.failures), zap.Error(o.connErr))
	case o.listErr != nil:
		s.failures++
		s.lastErr = o.listErr.Error()
		s.info = o.info
		s.names = 0
		p.apply(s, event{kind: evRefuses, err: o.listErr})
		p.log.Info("server unlistable", zap.Stringer("endpoint", ep), zap.Stringer("guid", guid), zap.Error(o.listErr))
	default:
		s.failures = 0
		s.lastErr = ""
		s.info = o.info
		s.names = len(o.names)
		s.listedAt = p.opt.Clock.Now()
		if up := o.upgrade; up != nil && s.cl == o.cl && !up.dead.Load() {
			// The watch moves to the proven TLS connection; the plain
			// one's close is no loss: it is no longer the watch.
			up.established = true
			s.cl = up
			o.cl.conn.Close()
			p.log.Debug("server watched over TLS", zap.Stringer("endpoint", s.ep), zap.Stringer("tls", o.info.TLS))
		}
		info := o.info
		info.Took = o.took
		p.apply(s, event{kind: evLists, names: o.names, info: info})
		p.log.Debug("server listed", zap.Stringer("endpoint", ep), zap.Stringer("guid", guid), zap.Int("names", len(o.names)))
	}
	if budget := p.tm.Load().throughRetries; s.life.origin == originThrough && budget > 0 && s.failures >= budget {
		p.stats.ThroughForgotten.Add(1)
		p.log.Debug("search-through endpoint forgotten after its retry budget", zap.Stringer("endpoint", ep), zap.Int("failures", s.failures))
		p.apply(s, event{kind: evDrop, reason: "forgotten: known only from search replies, and failed its retry budget"})
		return false
	}
	return p.finish(s)
}

// observe queues o's result for Options.Observe, in order with the
// reports. Called with p.mu held.
func (p *Prober) observe(o outcome) {
	obs := p.opt.Observe
	if obs == nil {
		return
	}
	result := "ok"
	switch {
	case o.connErr != nil:
		result = "failed"
	case o.listErr != nil:
		result = "refused"
	}
	took := o.took
	p.calls.Push(func() { obs(result, took) })
}

// settleClaim decides a restart claim from its verification attempt (o,
// on a connection of its own, see ident.verdict). A confirmed claim makes
// the new connection the watch and lets settle report the outcome under
// the new GUID; it returns false when there is nothing to report (a
// refuted claim). Called with p.mu held.
func (p *Prober) settleClaim(s *server, o *outcome) bool {
	claim, old := s.life.id.claim, s.life.id.guid
	proven := s.life.id.verdict(o.tcpGUID, o.connErr == nil)
	if proven.IsZero() {
		p.stats.VerifyRefuted.Add(1)
		if o.cl != nil && o.cl.conn != nil {
			o.cl.conn.Close()
		}
		p.log.Info("restart claim refuted over TCP: the watched server still answers at its endpoint",
			zap.Stringer("endpoint", s.ep), zap.Stringer("guid", old), zap.Stringer("claimed_guid", claim),
			zap.Stringer("answered_guid", o.tcpGUID))
		p.apply(s, event{kind: evRefuted})
		return false
	}
	p.stats.VerifyConfirmed.Add(1)
	p.log.Debug("restart confirmed over TCP", zap.Stringer("endpoint", s.ep), zap.Stringer("old_guid", old), zap.Stringer("guid", proven))
	if s.cl != nil {
		oldcl := s.cl
		s.cl = nil // its close is not a loss to report: Listed replaces it
		oldcl.conn.Close()
	}
	if o.connErr != nil || o.listErr != nil {
		// The new instance cannot be listed: the old one's names go.
		p.apply(s, event{kind: evRestarted, reason: "server restarted (new GUID confirmed over TCP)"})
	}
	p.apply(s, event{kind: evConfirmed, guid: proven})
	s.failures = 0
	if o.cl != nil && !o.closed {
		o.cl.established = true
		s.cl = o.cl
	}
	return true
}

// finish ends a settle: probe again at once if asked meanwhile. Called
// with p.mu held.
func (p *Prober) finish(s *server) bool {
	return p.apply(s, event{kind: evSettled})
}
