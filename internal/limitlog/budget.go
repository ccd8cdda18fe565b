package limitlog

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/pvans-project/pvans/internal/clock"
)

// The log's line budget. Forged beacons from 4,000 addresses for 10 s
// wrote 23,800–29,900 "server appeared" lines in 15 s, and journald's
// default (10,000 lines per 30 s per service) then dropped pvans's other
// messages too. Every message (by logger name and text, whatever its
// fields) is written at most LinesPerInterval times per Interval; the
// lines beyond are counted and one summary line per message per interval
// says how many were not written. A rare message, an operator's reload
// say, is written as always, whatever floods beside it.
const (
	// LinesPerInterval: 2 lines a second per message. The messages any
	// host can cause (server appeared, restarted, lost, unlistable,
	// duplicate names, refused clients...) are about 30: with each at its
	// bound that is under 2,000 lines per 30 s with the summaries.
	LinesPerInterval = 20
	// MaxMessages bounds the messages tracked; beyond it (a message
	// text built at run time) they share one budget.
	MaxMessages = 256
)

// SummaryMessage is the summary line's text.
const SummaryMessage = "repeated log lines not written"

// Budget bounds the lines of a logger's core (Wrap) per message.
type Budget struct {
	clk   clock.Clock
	every time.Duration
	lines int
	root  zapcore.Core // where summaries are written (set by Wrap)

	mu         sync.Mutex
	msgs       map[msgKey]*budgeted
	other      *budgeted // the budget shared beyond MaxMessages
	closed     bool      // Close ran: no timer is armed any more
	flushes    sync.WaitGroup
	suppressed atomic.Uint64
}

type msgKey struct{ logger, msg string }

// budgeted is one message's interval.
type budgeted struct {
	key     msgKey
	start   time.Time // the interval's start
	written int
	dropped uint64
	level   zapcore.Level // the most severe line dropped
	timer   clock.Timer   // writes the summary at the interval's end
}

// NewBudget returns a Budget of lines per message per every; 0 takes
// LinesPerInterval and Interval, clk nil the wall clock.
func NewBudget(lines int, every time.Duration, clk clock.Clock) *Budget {
	if lines <= 0 {
		lines = LinesPerInterval
	}
	if every <= 0 {
		every = Interval
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &Budget{clk: clk, every: every, lines: lines, msgs: make(map[msgKey]*budgeted)}
}

// Wrap returns c with its lines bounded (for zap.WrapCore); summaries are
// written to c. One Budget wraps one core.
func (b *Budget) Wrap(c zapcore.Core) zapcore.Core {
	b.root = c
	return &budgetCore{Core: c, b: b}
}

// Logger returns l with its lines bounded by a new Budget (NewBudget's
// arguments).
func Logger(l *zap.Logger, lines int, every time.Duration, clk clock.Clock) (*zap.Logger, *Budget) {
	b := NewBudget(lines, every, clk)
	return l.WithOptions(zap.WrapCore(b.Wrap)), b
}

// Suppressed is the lines not written since the start.
func (b *Budget) Suppressed() uint64 {
	if b == nil {
		return 0
	}
	return b.suppressed.Load()
}

type budgetCore struct {
	zapcore.Core
	b *Budget
}

func (c *budgetCore) With(fields []zapcore.Field) zapcore.Core {
	return &budgetCore{Core: c.Core.With(fields), b: c.b}
}

func (c *budgetCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.Core.Enabled(e.Level) {
		return ce
	}
	// DPanic and above end the program or mean a bug: always written.
	if e.Level < zapcore.DPanicLevel && !c.b.allow(e) {
		return ce
	}
	return c.Core.Check(e, ce)
}

// allow reports whether e may be written, and counts it if not.
func (b *Budget) allow(e zapcore.Entry) bool {
	now := b.clk.Now()
	k := msgKey{e.LoggerName, e.Message}
	b.mu.Lock()
	m := b.msgs[k]
	if m == nil {
		if len(b.msgs) < MaxMessages {
			m = &budgeted{key: k, start: now, level: zapcore.DebugLevel}
			b.msgs[k] = m
		} else {
			if b.other == nil {
				b.other = &budgeted{key: msgKey{msg: "(messages beyond the tracked ones)"}, start: now, level: zapcore.DebugLevel}
			}
			m = b.other
		}
	}
	var summary *budgeted
	if now.Sub(m.start) >= b.every {
		if m.dropped > 0 {
			summary = b.take(m) // its timer has not fired yet
		}
		m.start, m.written = now, 0
	}
	ok := m.written < b.lines
	if ok {
		m.written++
	} else {
		m.dropped++
		m.level = max(m.level, e.Level)
		b.suppressed.Add(1)
		if m.timer == nil && !b.closed {
			b.flushes.Add(1)
			m.timer = b.clk.AfterFunc(m.start.Add(b.every).Sub(now), func() { b.flush(m) })
		}
	}
	b.mu.Unlock()
	b.write(summary)
	return ok
}

// take moves m's dropped count into a summary and stops its timer.
// Called with mu held.
func (b *Budget) take(m *budgeted) *budgeted {
	s := &budgeted{key: m.key, dropped: m.dropped, level: m.level}
	m.dropped, m.level = 0, zapcore.DebugLevel
	if m.timer != nil {
		if m.timer.Stop() {
			b.flushes.Done() // it will not run
		}
		m.timer = nil
	}
	return s
}

// flush writes m's summary at the end of its interval.
func (b *Budget) flush(m *budgeted) {
	defer b.flushes.Done()
	b.mu.Lock()
	var s *budgeted
	if m.dropped > 0 {
		s = b.take(m)
	}
	m.timer = nil
	b.mu.Unlock()
	b.write(s)
}

// Close writes the summaries of the intervals still open and stops their
// timers; it returns once no summary is being written. A line dropped
// after Close is counted (Suppressed) but summarised nowhere. Without it
// a timer wrote its summary after the logger's owner had stopped: a
// daemon's test had ended by then, and the write to the test's log
// panicked the test binary.
func (b *Budget) Close() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.closed = true
	var sums []*budgeted
	for _, m := range b.msgs {
		if m.dropped > 0 || m.timer != nil {
			if s := b.take(m); s.dropped > 0 {
				sums = append(sums, s)
			}
		}
	}
	if m := b.other; m != nil && (m.dropped > 0 || m.timer != nil) {
		if s := b.take(m); s.dropped > 0 {
			sums = append(sums, s)
		}
	}
	b.mu.Unlock()
	for _, s := range sums {
		b.write(s)
	}
	b.flushes.Wait() // a timer that fired before Close took its message
}

func (b *Budget) write(s *budgeted) {
	if s == nil {
		return
	}
	e := zapcore.Entry{Level: s.level, Time: b.clk.Now(), LoggerName: s.key.logger, Message: SummaryMessage}
	if ce := b.root.Check(e, nil); ce != nil {
		ce.Write(zap.String("message", s.key.msg), zap.Uint64("not_written", s.dropped),
			zap.Int("written", b.lines), zap.Duration("interval", b.every))
	}
}
