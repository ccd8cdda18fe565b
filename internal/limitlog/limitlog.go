// Package limitlog reports a bound being hit without flooding the log: at
// most one line per kind per interval, carrying how often the bound was
// hit since the previous line. The counters (metrics) carry the full story;
// the log line tells the operator that, and which bound, at the time.
//
// It also paces accept loops that fail (EMFILE, ENFILE, ENOBUFS): a loop
// that retries at once spins a core and writes a line per failure.
//
// Beneath both, Budget bounds a whole logger: every message is written at
// most LinesPerInterval times per Interval, then summarised with a count,
// so no host on the network (nor all of them together) writes more than a
// fixed number of lines a second, whatever line it makes pvans write.
package limitlog

import (
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/clock"
)

// Interval is the default time between two lines of one kind.
const Interval = 10 * time.Second

// Log rate-limits warnings per kind. The zero value is not usable: use New.
// A nil *Log logs nothing.
type Log struct {
	log   *zap.Logger
	clk   clock.Clock
	every time.Duration

	mu   sync.Mutex
	last map[string]*hits
}

type hits struct {
	at     time.Time
	missed uint64 // hits not logged since at
}

// New returns a Log writing to l at most once per every (0 = Interval) per
// kind; clk nil = the wall clock.
func New(l *zap.Logger, every time.Duration, clk clock.Clock) *Log {
	if l == nil {
		l = zap.NewNop()
	}
	if every <= 0 {
		every = Interval
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &Log{log: l, clk: clk, every: every, last: make(map[string]*hits)}
}

// Hit records one hit of the bound named kind and logs msg (with fields and
// the hits suppressed since the last line) if the kind's interval passed.
// kind must come from a small fixed set (it is kept forever).
func (l *Log) Hit(kind string, msg string, fields ...zap.Field) {
	if l == nil {
		return
	}
	now := l.clk.Now()
	l.mu.Lock()
	k := l.last[kind]
	if k == nil {
		k = new(hits)
		l.last[kind] = k
	} else if now.Sub(k.at) < l.every {
		k.missed++
		l.mu.Unlock()
		return
	}
	missed := k.missed
	k.at, k.missed = now, 0
	l.mu.Unlock()
	l.log.Warn(msg, append(fields, zap.String("limit", kind), zap.Uint64("more_hits_since_last_line", missed))...)
}

// Backoff paces an accept loop after errors: 5 ms doubling to 1 s (as
// net/http does), reset by the next successful accept. Not safe for
// concurrent use: one per loop.
type Backoff struct {
	Log   *Log
	Kind  string // the Log kind, e.g. "tcp_accept"
	delay time.Duration
}

// Failed logs err (rate-limited) and sleeps the current delay, or less if
// closing is closed first.
func (b *Backoff) Failed(err error, closing <-chan struct{}) {
	if b.delay == 0 {
		b.delay = 5 * time.Millisecond
	} else {
		b.delay = min(2*b.delay, time.Second)
	}
	b.Log.Hit(b.Kind, "accept failed; backing off", zap.Error(err), zap.Duration("retry_in", b.delay))
	t := time.NewTimer(b.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-closing:
	}
}

// OK resets the delay after a successful accept.
func (b *Backoff) OK() { b.delay = 0 }
