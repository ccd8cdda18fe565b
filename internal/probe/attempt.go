package probe

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/pva"
)

type outcome struct {
	names      []string
	info       Info
	tcpGUID    pva.GUID // the endpoint's answer to the discovery ping on a fresh connection
	cl         *client  // the connection the listing ran on
	upgrade    *client  // a TLS connection to the server, proven by the listing: the watch to be
	verify     bool     // a restart claim checked on a connection of its own
	connErr    error    // no usable connection
	listErr    error    // connected, listing failed
	superseded bool     // forgotten or restarted while connecting
	closed     bool     // cl had closed when settle read it (settle sets it)
	took       time.Duration
}

// retryClass reports whether s's next probe queues as a retry (behind
// fresh probes): it failed last time and nothing new was claimed since.
// It consumes the news. Called with p.mu held.
func (s *server) retryClass() bool {
	retry := s.failures > 0 && !s.news
	s.news = false
	return retry
}

// enqueue queues s's next probe in the pool (the spawn action): its
// goroutine starts when a slot is granted, so a waiting probe is a
// queue entry, not a goroutine. Called with p.mu held.
func (p *Prober) enqueue(s *server) {
	p.wg.Add(1) // the queued probe counts: Close waits for its goroutine, or for forget to take it out
	w := p.sched.enqueue(s.ep.Addr(), s.retryClass(), func(w *waiter) { go p.run(s, w) })
	s.wait = w // run clears it; it needs p.mu, held here
}

// run is one probe of s, granted a slot by w; it queues the next one at
// once when asked again meanwhile.
func (p *Prober) run(s *server, w *waiter) {
	defer p.wg.Done()
	p.mu.Lock()
	if s.wait == w {
		s.wait = nil
	}
	if s.life.phase == phaseForgotten || p.closed {
		// Forgotten while it was being granted.
		p.mu.Unlock()
		p.sched.release(w)
		return
	}
	ctx, cancel := context.WithCancel(p.ctx)
	s.cancel = cancel
	p.mu.Unlock()
	began := time.Now()
	o := p.attempt(ctx, s)
	o.took = time.Since(began)
	p.mu.Lock()
	s.cancel = nil
	p.mu.Unlock()
	cancel()
	p.sched.release(w)
	again := p.settle(s, o)
	p.deliver()
	if again {
		p.mu.Lock()
		if s.life.phase != phaseForgotten && !p.closed {
			p.enqueue(s)
		}
		p.mu.Unlock()
	}
}

// attempt connects (unless a watch connection is up) and lists s. On a
// fresh connection it also asks the endpoint for its GUID (discovery ping
// over TCP): that answer, not the hint that caused the probe, is who the
// server is. A restart claim against a live watch runs on a connection of
// its own, so the old watch stays until the claim is confirmed.
func (p *Prober) attempt(ctx context.Context, s *server) outcome {
	p.mu.Lock()
	p.stats.Probes.Add(1)
	cl, guid, tlsEP := s.cl, s.life.id.guid, s.info.TLS
	verify := !s.life.id.claim.IsZero() && cl != nil
	if verify {
		cl = nil
	}
	first := s.listedAt.IsZero() && s.failures == 0
	p.mu.Unlock()

	tm := p.tm.Load()
	timeout := tm.probeTimeout
	if first {
		// A server never listed has not shown it deserves the full
		// timeout: one that holds the connection silent gives its slot
		// back soon, and its retry (behind fresh probes) gets the full one.
		timeout = within(timeout, tm.firstTimeout)
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	pinged := false
	if cl == nil {
		if !verify && p.opt.TLS != nil && tlsEP.IsValid() && !guid.IsZero() {
			// The server is known to serve TLS: list and watch it there,
			// within half the time, so plain TCP still has the rest.
			tctx, tcancel := withTimeout(ctx, timeout/2)
			tcl, _, err := p.dialTLS(tctx, s, tlsEP, guid)
			tcancel()
			if err == nil {
				cl = tcl
			} else {
				p.mu.Lock()
				p.stats.TLSFallbacks.Add(1)
				p.mu.Unlock()
				p.log.Debug("TLS connection failed: connecting over plain TCP", zap.Stringer("endpoint", s.ep), zap.Stringer("tls", tlsEP), zap.Error(err))
			}
		}
		if cl == nil {
			cl = newClient(p, s)
			conn, err := p.opt.Dial(ctx, s.ep, tm.conn, cl)
			if err != nil {
				return outcome{connErr: err, verify: verify}
			}
			cl.mu.Lock()
			cl.conn = conn
			cl.mu.Unlock()
		}
		conn := cl.conn
		p.mu.Lock()
		if s.life.phase == phaseForgotten || p.closed || s.life.id.guid != guid {
			p.mu.Unlock()
			conn.Close()
			return outcome{superseded: true}
		}
		dead := cl.dead.Load()
		if !verify {
			cl.established = true
			s.cl = cl
			if dead {
				s.cl = nil
			}
		}
		p.mu.Unlock()
		if dead {
			return outcome{connErr: errConnLost, verify: verify, cl: cl}
		}
		var port uint16
		if p.opt.PingPort != nil {
			port = p.opt.PingPort()
		}
		cl.ping(p.pingSeq(cl), port)
		pinged = true
		defer p.pingDone(cl)
	}
	names, info, upgrade, err := cl.list(ctx)
	o := outcome{names: names, info: info, cl: cl, upgrade: upgrade, verify: verify}
	if err != nil {
		var le *ListError
		if errors.As(err, &le) {
			o.listErr = err
		} else {
			o.connErr = err
		}
	}
	if pinged {
		o.tcpGUID = cl.pingGUID(ctx, p.opt.PingWait)
		if o.tcpGUID.IsZero() && err == nil && len(names) > 0 {
			// The empty search went unanswered: a search for a name the
			// server just listed proves its GUID the same way, or forged
			// claims would name it after its connection drops.
			cl.searchName(names[0])
			o.tcpGUID = cl.pingGUID(ctx, p.opt.PingWait)
		}
	}
	return o
}
