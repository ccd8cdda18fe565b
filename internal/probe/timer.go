package probe

import (
	"time"
)

func (p *Prober) stopTimer(s *server) {
	s.timerGen++
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.next = time.Time{}
}

// schedule arms s's one timer: retry or re-list after d.
func (p *Prober) schedule(s *server, d time.Duration) {
	p.stopTimer(s)
	gen := s.timerGen
	s.next = p.opt.Clock.Now().Add(d)
	s.timer = p.opt.Clock.AfterFunc(d, func() {
		p.mu.Lock()
		if s.timerGen == gen && s.life.phase != phaseForgotten && !p.closed {
			s.timer = nil
			s.next = time.Time{}
			p.kick(s)
		}
		p.mu.Unlock()
	})
	if p.onSchedule != nil {
		p.onSchedule(s.ep, d, s.failures)
	}
}

// retry schedules the next attempt after a failure; without a backoff
// (a zero Min) there is none until the server is asked for again. A
// server that answered and would not list (refused) is retried on a
// schedule of its own (unlistableBackoff).
func (p *Prober) retry(s *server) {
	b := p.tm.Load().backoff
	if b.Min <= 0 {
		p.stopTimer(s)
		return
	}
	if s.life.phase == phaseRefused {
		b = unlistableBackoff(b)
	}
	p.schedule(s, b.Delay(s.failures, p.rnd.Float64()))
}
