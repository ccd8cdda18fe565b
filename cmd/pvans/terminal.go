package main

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// invokedAs is how the reader started this binary, for the hints it
// prints: `go run` builds into a go-build temporary directory, and a
// README reader who typed `go run ./cmd/pvans demo` has no `pvans` on
// their PATH.
func invokedAs(exe string) string {
	if strings.Contains(exe, string(filepath.Separator)+"go-build") && filepath.Base(filepath.Dir(exe)) == "exe" {
		return "go run ./cmd/pvans"
	}
	return "pvans"
}

// selfCommand is invokedAs for this process.
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "pvans"
	}
	return invokedAs(exe)
}

// inBackground reports whether f is a terminal whose foreground process
// group is not ours: a read would stop the process with SIGTTIN (`pvans
// demo &`).
func inBackground(f *os.File) bool {
	fg, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	if err != nil {
		return false // not a terminal: reading cannot stop us
	}
	return fg != unix.Getpgrp()
}

// waitForeground returns once background reports false, checking every
// interval, or false when done closes first.
func waitForeground(background func() bool, interval time.Duration, done <-chan struct{}) bool {
	for background() {
		select {
		case <-done:
			return false
		case <-time.After(interval):
		}
	}
	return true
}
