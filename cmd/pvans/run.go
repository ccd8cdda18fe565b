package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/buildinfo"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/daemon"
	"github.com/pvans-project/pvans/internal/logging"
	"github.com/pvans-project/pvans/internal/sdnotify"
)

// shutdownTimeout bounds graceful shutdown (systemd's TimeoutStopSec is 20 s).
const shutdownTimeout = 15 * time.Second

func cmdRun(args []string, stdout, stderr io.Writer) int {
	return runDaemon("run", args, stdout, stderr)
}

// cmdRelay is the relay profile: the same daemon with relay.only on and
// the HTTP endpoint off unless set (config.RelayProfile).
func cmdRelay(args []string, stdout, stderr io.Writer) int {
	return runDaemon("relay", args, stdout, stderr)
}

func runDaemon(name string, args []string, stdout, stderr io.Writer) int {
	cfg, _, err := loadConfig(name, args, stderr)
	switch {
	case errors.Is(err, errVersion):
		return cmdVersion(stdout)
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "pvans: configuration refused, not starting:\n"+err.Error())
		return 1
	}
	log, logCtl, err := logging.New(cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		fmt.Fprintln(stderr, "pvans:", err)
		return 1
	}
	defer func() { _ = log.Sync() }()
	log.Info("pvans starting", zap.String("version", buildinfo.String()), zap.Int("pid", os.Getpid()))
	warnIgnored(log, cfg)

	// Catch signals before anything starts: a SIGHUP (a reload) that
	// arrives during start-up would otherwise end the process, SIGHUP's
	// default action. It is handled once the daemon runs.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	notify := sdnotify.FromEnv()
	d, err := daemon.New(cfg, daemon.Options{Logger: log})
	if err != nil {
		log.Error("cannot build the daemon", zap.Error(err))
		return 1
	}
	if err := d.Start(); err != nil {
		log.Error("cannot start", zap.Error(err))
		return 1
	}
	_ = notify.Ready("serving")

	stopWatchdog := make(chan struct{})
	if iv := sdnotify.WatchdogInterval(); iv > 0 && notify.Enabled() {
		go func() {
			t := time.NewTicker(iv)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					_ = notify.Watchdog()
				case <-stopWatchdog:
					return
				}
			}
		}()
	}

	for sig := range sigs {
		if sig == syscall.SIGHUP {
			_ = notify.Reloading()
			next, rerr := config.Reload(cfg)
			if rerr != nil {
				log.Error("configuration reload refused; keeping the last good configuration", zap.Error(rerr))
			} else {
				warnIgnored(log, next)
				if err := logCtl.Apply(next.Log.Level, next.Log.Format); err != nil {
					log.Warn("log level and format not changed", zap.Error(err))
				}
				applied, restart := d.Reload(next)
				log.Info("configuration reloaded", zap.Strings("applied", applied), zap.Strings("needs_restart", restart))
				cfg = next
			}
			_ = notify.Ready("serving")
			continue
		}
		log.Info("shutting down", zap.Stringer("signal", sig))
		break
	}
	close(stopWatchdog)
	_ = notify.Stopping()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		log.Error("shutdown", zap.Error(err))
		return 1
	}
	log.Info("stopped")
	return 0
}

// warnIgnored logs each setting the sources set that pvans ignores (a
// setting now a constant, docs/upgrading.md): at start and at every
// reload, so the line is in the log while the file still says it.
func warnIgnored(log *zap.Logger, cfg *config.Config) {
	for _, w := range cfg.Warnings() {
		log.Warn("WARNING: setting ignored: " + w)
	}
}
