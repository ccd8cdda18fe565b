// Package buildinfo says which pvans this is: its version, the commit it
// was built from, when, and by which Go. A release links the first three
// in (scripts/release.sh):
//
//	-ldflags "-X github.com/pvans-project/pvans/internal/buildinfo.Version=0.1.0
//	          -X github.com/pvans-project/pvans/internal/buildinfo.Commit=<sha>
//	          -X github.com/pvans-project/pvans/internal/buildinfo.Date=<RFC 3339>"
//
// A binary built otherwise reads what the Go toolchain recorded: the module
// version for `go install …/cmd/pvans@v0.1.0`, and the VCS revision and
// commit time for a `go build` in a checkout (unless -buildvcs=false).
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time by a release build; empty otherwise.
var (
	Version = ""
	Commit  = ""
	Date    = ""
)

// DevVersion is the version of a build that is neither a release nor a
// tagged module: the patch after the last release (CHANGELOG.md's newest
// "## [X.Y.Z]") with a -dev suffix, so it sorts after that release and
// before the next (semantic versioning's pre-release rule), as Go's
// pseudo-versions do. TestDevVersionFollowsTheLastRelease keeps it so.
const DevVersion = "0.1.1-dev"

// Unknown stands for a commit or date the build did not record.
const Unknown = "unknown"

// Info is one build's identity.
type Info struct {
	Version   string // semantic version without a leading "v", e.g. 0.1.0
	Commit    string // full VCS revision, "-dirty" appended for a modified tree
	Date      string // commit or build time, RFC 3339 in UTC
	GoVersion string // e.g. go1.26.8
}

// Read returns this binary's Info.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return read(bi, Version, Commit, Date)
}

// read is Read with its inputs given, so each source can be tested.
func read(bi *debug.BuildInfo, version, commit, date string) Info {
	in := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		var rev, at string
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev != "" && modified {
			rev += "-dirty"
		}
		mv := bi.Main.Version
		if mv == "(devel)" {
			mv = ""
		}
		if in.Version == "" && mv != "" {
			in.Version = strings.TrimPrefix(mv, "v")
		}
		if in.Commit == "" {
			in.Commit = rev
		}
		if in.Commit == "" {
			// A pseudo-version (…-20261130120000-0123456789ab) names its
			// commit; a plain module version carries no revision.
			in.Commit = pseudoRevision(mv)
		}
		if in.Date == "" {
			in.Date = at
		}
	}
	if in.Version == "" {
		in.Version = DevVersion
	}
	if in.Commit == "" {
		in.Commit = Unknown
	}
	if in.Date == "" {
		in.Date = Unknown
	}
	return in
}

// pseudoRevision returns the 12-digit revision a Go pseudo-version ends in,
// or "".
func pseudoRevision(v string) string {
	v, _, _ = strings.Cut(v, "+")
	i := strings.LastIndexByte(v, '-')
	if i < 0 || len(v)-i-1 != 12 || strings.Count(v, "-") < 2 {
		return ""
	}
	rev := v[i+1:]
	for _, c := range rev {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return ""
		}
	}
	return rev
}

// Get returns the bare version.
func Get() string { return Read().Version }

// String is the one-line form for logs, e.g.
// "0.1.0 (commit 0123456789ab, 2026-11-30T12:00:00Z, go1.26.8)".
func String() string { return Read().String() }

// String is the one-line form for logs.
func (in Info) String() string {
	c, dirty := strings.CutSuffix(in.Commit, "-dirty")
	if len(c) > 12 {
		c = c[:12]
	}
	if dirty {
		c += "-dirty"
	}
	return in.Version + " (commit " + c + ", " + in.Date + ", " + in.GoVersion + ")"
}
