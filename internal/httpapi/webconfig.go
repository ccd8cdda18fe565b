package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/exporter-toolkit/web"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.yaml.in/yaml/v2"

	"github.com/pvans-project/pvans/internal/limitlog"
)

// CheckWebConfig reads an exporter-toolkit web configuration file (the
// Prometheus exporters' --web.config.file: TLS, client certificates, basic
// auth with bcrypt hashes) and reports whether it turns TLS on. An empty
// path is plain HTTP, no authentication.
func CheckWebConfig(path string) (tls bool, err error) {
	if path == "" {
		return false, nil
	}
	if err := web.Validate(path); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	var c web.Config
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	c.TLSConfig.SetDirectory(filepath.Dir(path))
	return c.TLSConfig.IsEnabled(), nil
}

// slogToZap hands exporter-toolkit's log records to the daemon's logger.
// Warnings and errors go through limitlog under one kind: the toolkit logs
// one per request when the file has become unreadable, and a client
// must not be able to turn that into a log flood.
type slogToZap struct {
	l  *zap.Logger
	ll *limitlog.Log
	f  []zap.Field
}

func (h *slogToZap) Enabled(_ context.Context, lv slog.Level) bool {
	return lv >= slog.LevelWarn || h.l.Core().Enabled(zapLevel(lv))
}

func (h *slogToZap) Handle(_ context.Context, r slog.Record) error {
	f := append([]zap.Field(nil), h.f...)
	r.Attrs(func(a slog.Attr) bool { f = append(f, zap.Any(a.Key, a.Value.Any())); return true })
	if r.Level >= slog.LevelWarn {
		h.ll.Hit("http_web_config", "web configuration: "+r.Message, f...)
		return nil
	}
	if ce := h.l.Check(zapLevel(r.Level), r.Message); ce != nil {
		ce.Write(f...)
	}
	return nil
}

func (h *slogToZap) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.f = append([]zap.Field(nil), h.f...)
	for _, a := range as {
		n.f = append(n.f, zap.Any(a.Key, a.Value.Any()))
	}
	return &n
}

func (h *slogToZap) WithGroup(string) slog.Handler { return h }

func zapLevel(lv slog.Level) zapcore.Level {
	switch {
	case lv >= slog.LevelError:
		return zapcore.ErrorLevel
	case lv >= slog.LevelWarn:
		return zapcore.WarnLevel
	case lv >= slog.LevelInfo:
		return zapcore.InfoLevel
	}
	return zapcore.DebugLevel
}
