// Package logging builds the daemon's zap logger: JSON when stderr is not
// a terminal (systemd's journal, containers, log shippers), human-readable
// console output on a terminal, at the configured level. Level and format
// can both change while running (a configuration reload): every logger
// derived from the one New returns follows. Durations are written as Go
// durations ("10m0s"), as the configuration takes them.
package logging

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"
)

// Control changes a running logger's level and format.
type Control struct {
	lvl zap.AtomicLevel
	sw  *switcher
	out zapcore.WriteSyncer
}

// New returns a logger writing to stderr. format is auto, console or json;
// level is debug, info, warn or error.
func New(level, format string) (*zap.Logger, *Control, error) {
	return NewTo(os.Stderr, level, format)
}

// NewTo is New writing to w (tests read what was logged).
func NewTo(w io.Writer, level, format string) (*zap.Logger, *Control, error) {
	c := &Control{lvl: zap.NewAtomicLevel(), sw: &switcher{}, out: zapcore.Lock(zapcore.AddSync(w))}
	if err := c.Apply(level, format); err != nil {
		return nil, nil, err
	}
	return zap.New(&switchable{sw: c.sw}, zap.ErrorOutput(c.out)), c, nil
}

// Apply sets the level and the format. On error nothing changes.
func (c *Control) Apply(level, format string) error {
	var l zapcore.Level
	if level == "" {
		level = "info"
	}
	if err := l.UnmarshalText([]byte(strings.ToLower(level))); err != nil {
		return fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	enc, err := encoder(format)
	if err != nil {
		return err
	}
	c.sw.cur.Store(&base{core: zapcore.NewCore(enc, c.out, c.lvl)})
	c.lvl.SetLevel(l)
	return nil
}

func encoder(format string) (zapcore.Encoder, error) {
	switch strings.ToLower(format) {
	case "", "auto":
		format = "json"
		if isTerminal(os.Stderr) && os.Getenv("JOURNAL_STREAM") == "" {
			format = "console"
		}
	case "console", "json":
	default:
		return nil, fmt.Errorf("log format %q: want auto, console or json", format)
	}
	if strings.ToLower(format) == "json" {
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		ec.TimeKey = "ts"
		// "10m0s", as the configuration writes it, not 600 (seconds).
		ec.EncodeDuration = zapcore.StringDurationEncoder
		return zapcore.NewJSONEncoder(ec), nil
	}
	ec := zap.NewDevelopmentEncoderConfig()
	ec.EncodeTime = zapcore.TimeEncoderOfLayout("2006-01-02T15:04:05.000Z07:00")
	ec.EncodeDuration = zapcore.StringDurationEncoder
	return zapcore.NewConsoleEncoder(ec), nil
}

// switcher holds the current root core; a new *base marks a switch.
type switcher struct{ cur atomic.Pointer[base] }

type base struct{ core zapcore.Core }

// switchable is a core that writes through the switcher's current root
// core with its own fields (from With) added. The derived core is built
// once per switch, not per entry.
type switchable struct {
	sw     *switcher
	fields []zapcore.Field
	cache  atomic.Pointer[derived]
}

type derived struct {
	b    *base
	core zapcore.Core
}

func (s *switchable) core() zapcore.Core {
	b := s.sw.cur.Load()
	if d := s.cache.Load(); d != nil && d.b == b {
		return d.core
	}
	c := b.core
	if len(s.fields) > 0 {
		c = c.With(s.fields)
	}
	s.cache.Store(&derived{b: b, core: c})
	return c
}

func (s *switchable) Enabled(l zapcore.Level) bool { return s.core().Enabled(l) }

func (s *switchable) With(fields []zapcore.Field) zapcore.Core {
	return &switchable{sw: s.sw, fields: append(s.fields[:len(s.fields):len(s.fields)], fields...)}
}

func (s *switchable) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if s.Enabled(e.Level) {
		return ce.AddCore(e, s)
	}
	return ce
}

func (s *switchable) Write(e zapcore.Entry, fields []zapcore.Field) error {
	return s.core().Write(e, fields)
}

func (s *switchable) Sync() error { return s.core().Sync() }

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
