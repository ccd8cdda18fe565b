package probe

import (
	"errors"
	"io"
	"syscall"

	"github.com/pvans-project/pvans/internal/pvaconn"
)

// watched: a watch connection to s is up. p.mu held.
func (s *server) watched() bool {
	return s.cl != nil && !s.cl.dead.Load()
}

// connClosed is the watch: the connection of cl ended.
func (p *Prober) connClosed(cl *client, err error) {
	p.mu.Lock()
	s := cl.s
	if !cl.established || s.cl != cl || s.life.phase == phaseForgotten || p.closed {
		p.mu.Unlock()
		return
	}
	p.watchEnded(s, err)
	p.mu.Unlock()
	p.deliver()
}

// watchEnded is the watch-ends event of s's watch, which closed with err.
// Whoever first finds the watch dead under the lock calls it and clears
// s.cl, so the other finds nothing to do: connClosed, or an attempt
// settling on the dead watch. p.mu held.
func (p *Prober) watchEnded(s *server, err error) {
	s.cl = nil
	reason := closeReason(err)
	s.lastErr = reason
	p.apply(s, event{kind: evWatchEnds, ok: closedByServer(err), reason: reason})
}

// closedByServer reports whether a watch ended because the server closed
// or reset it (the process is gone), not by silence, which a network blip
// causes as well and which proves nothing.
func closedByServer(err error) bool {
	return err == nil || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func closeReason(err error) string {
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return "connection closed by server"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset by server"
	case errors.Is(err, pvaconn.ErrIdleTimeout):
		return "server stopped answering (no reply to echo)"
	}
	return err.Error()
}
