// Package logging builds the daemon's zap logger: JSON when stderr is not
// a terminal (systemd's journal, containers, log shippers), human-readable
// console output on a terminal, at the configured level.
package logging

import (
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"
)

// New returns a logger. format is auto, console or json; level is debug,
// info, warn or error. The returned AtomicLevel changes the level at run
// time (SIGHUP reloads).
func New(level, format string) (*zap.Logger, zap.AtomicLevel, error) {
	lvl := zap.NewAtomicLevel()
	if err := SetLevel(lvl, level); err != nil {
		return nil, lvl, err
	}
	switch strings.ToLower(format) {
	case "", "auto":
		format = "json"
		if isTerminal(os.Stderr) && os.Getenv("JOURNAL_STREAM") == "" {
			format = "console"
		}
	case "console", "json":
	default:
		return nil, lvl, fmt.Errorf("log format %q: want auto, console or json", format)
	}
	var enc zapcore.Encoder
	if format == "json" {
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		ec.TimeKey = "ts"
		enc = zapcore.NewJSONEncoder(ec)
	} else {
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.TimeEncoderOfLayout("2006-01-02T15:04:05.000Z07:00")
		enc = zapcore.NewConsoleEncoder(ec)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(os.Stderr), lvl)
	return zap.New(core, zap.ErrorOutput(zapcore.Lock(os.Stderr))), lvl, nil
}

// SetLevel parses and applies a level name.
func SetLevel(lvl zap.AtomicLevel, level string) error {
	if level == "" {
		level = "info"
	}
	var l zapcore.Level
	if err := l.UnmarshalText([]byte(strings.ToLower(level))); err != nil {
		return fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	lvl.SetLevel(l)
	return nil
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
