// Package buildinfo holds the version stamped into the binary
// (-ldflags "-X github.com/pvans-project/pvans/internal/buildinfo.Version=...")
// and falls back to the module version recorded by the Go toolchain.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version is set at link time for releases.
var Version = ""

// String returns the version, e.g. "0.1.0-dev (go1.26.8)".
func String() string { return Get() + " (" + runtime.Version() + ")" }

// Get returns the bare version.
func Get() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v := bi.Main.Version
		if v != "" && v != "(devel)" {
			return v
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "0.1.0-dev+" + s.Value[:12]
			}
		}
	}
	return "0.1.0-dev"
}
