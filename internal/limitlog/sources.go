package limitlog

import (
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/clock"
)

// MaxSources bounds the sources a Sources remembers by default.
const MaxSources = 1024

// Sources logs an event that comes from the network at info level at most
// once per source address per interval (a refused TCP client): an
// operator sees each source, a source retrying in a loop writes one line
// per interval, with how often it came since its previous line. The table
// is bounded (MaxSources): when it is full, sources whose interval has
// passed are forgotten; while none has, a new source is not logged (the
// caller's counter still counts it) and Suppressed counts it.
// A nil *Sources logs nothing.
type Sources struct {
	log   *zap.Logger
	clk   clock.Clock
	every time.Duration
	max   int

	mu         sync.Mutex
	last       map[netip.Addr]*hits
	pruneAfter time.Time // while full: no entry expires before this
	suppressed uint64
}

// NewSources returns a Sources writing to l at most once per every per
// source; every 0 = one minute, max 0 = MaxSources, clk nil = the wall
// clock.
func NewSources(l *zap.Logger, every time.Duration, max int, clk clock.Clock) *Sources {
	if l == nil {
		l = zap.NewNop()
	}
	if every <= 0 {
		every = time.Minute
	}
	if max <= 0 {
		max = MaxSources
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &Sources{log: l, clk: clk, every: every, max: max, last: make(map[netip.Addr]*hits)}
}

// Hit records one event from src and logs msg with fields (and the events
// from src not logged since its last line) if src's interval passed.
func (s *Sources) Hit(src netip.Addr, msg string, fields ...zap.Field) {
	if s == nil {
		return
	}
	now := s.clk.Now()
	s.mu.Lock()
	h := s.last[src]
	switch {
	case h != nil && now.Sub(h.at) < s.every:
		h.missed++
		s.mu.Unlock()
		return
	case h == nil && len(s.last) >= s.max && !s.prune(now):
		s.suppressed++
		s.mu.Unlock()
		return
	case h == nil:
		h = new(hits)
		s.last[src] = h
	}
	missed := h.missed
	h.at, h.missed = now, 0
	s.mu.Unlock()
	s.log.Info(msg, append(fields, zap.Uint64("more_since_last_line", missed))...)
}

// prune forgets the sources whose interval has passed and reports whether
// there is room now. A full table of fresh entries is scanned again only
// once the oldest of them expires. Called with mu held.
func (s *Sources) prune(now time.Time) bool {
	if now.Before(s.pruneAfter) {
		return false
	}
	oldest := now
	for a, h := range s.last {
		if now.Sub(h.at) >= s.every {
			delete(s.last, a)
		} else if h.at.Before(oldest) {
			oldest = h.at
		}
	}
	if len(s.last) < s.max {
		return true
	}
	s.pruneAfter = oldest.Add(s.every)
	return false
}

// Suppressed is how many events of sources not in the full table were not
// logged.
func (s *Sources) Suppressed() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.suppressed
}

// Len is the number of sources remembered.
func (s *Sources) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.last)
}
