package buildinfo

import (
	"os"
	"regexp"
	"runtime/debug"
	"strconv"
	"testing"
)

func TestReadSources(t *testing.T) {
	vcs := func(rev, at, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: at}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, c := range []struct {
		name                  string
		bi                    *debug.BuildInfo
		version, commit, date string
		want                  Info
	}{
		{"release: link-time values win", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("ffff", "2000-01-01T00:00:00Z", "false")},
			"0.1.0", rev, "2026-11-30T12:00:00Z", Info{"0.1.0", rev, "2026-11-30T12:00:00Z", "go1.26.8"}},
		{"go build in a checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "2026-11-30T12:00:00Z", "false")},
			"", "", "", Info{DevVersion, rev, "2026-11-30T12:00:00Z", "go1.26.8"}},
		{"go build, modified tree", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "2026-11-30T12:00:00Z", "true")},
			"", "", "", Info{DevVersion, rev + "-dirty", "2026-11-30T12:00:00Z", "go1.26.8"}},
		{"go install @v0.1.0", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.0"}},
			"", "", "", Info{"0.1.0", Unknown, Unknown, "go1.26.8"}},
		{"go install @commit (pseudo-version)", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.1-0.20261201100000-0123456789ab"}},
			"", "", "", Info{"0.1.1-0.20261201100000-0123456789ab", "0123456789ab", Unknown, "go1.26.8"}},
		{"-buildvcs=false", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"", "", "", Info{DevVersion, Unknown, Unknown, "go1.26.8"}},
	} {
		if got := read(c.bi, c.version, c.commit, c.date); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestString(t *testing.T) {
	in := Info{"0.1.0", "0123456789abcdef0123456789abcdef01234567", "2026-11-30T12:00:00Z", "go1.26.8"}
	if got, want := in.String(), "0.1.0 (commit 0123456789ab, 2026-11-30T12:00:00Z, go1.26.8)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	in.Commit += "-dirty"
	if got, want := in.String(), "0.1.0 (commit 0123456789ab-dirty, 2026-11-30T12:00:00Z, go1.26.8)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestPseudoRevision(t *testing.T) {
	for v, want := range map[string]string{
		"v0.0.0-20261130120000-0123456789ab":         "0123456789ab",
		"v0.1.1-0.20261130120000-0123456789ab":       "0123456789ab",
		"v0.1.1-0.20261130120000-0123456789ab+dirty": "0123456789ab",
		"v0.1.0":        "",
		"v0.1.0-rc1":    "",
		"v1.0.0-beta-x": "",
	} {
		if got := pseudoRevision(v); got != want {
			t.Errorf("pseudoRevision(%q) = %q, want %q", v, got, want)
		}
	}
}

// A development build sorts after the last release and before the next:
// "0.1.0-dev" came before the released 0.1.0, so a package manager or a
// version check took a newer build for an older one.
func TestDevVersionFollowsTheLastRelease(t *testing.T) {
	log, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Skip("no CHANGELOG.md beside the module:", err)
	}
	m := regexp.MustCompile(`(?m)^## \[(\d+)\.(\d+)\.(\d+)\]`).FindSubmatch(log)
	if m == nil {
		t.Fatal("CHANGELOG.md names no release")
	}
	num := func(b []byte) int { n, _ := strconv.Atoi(string(b)); return n }
	last := [3]int{num(m[1]), num(m[2]), num(m[3])}
	d := regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)-dev$`).FindStringSubmatch(DevVersion)
	if d == nil {
		t.Fatalf("DevVersion %q is not X.Y.Z-dev", DevVersion)
	}
	dev := [3]int{}
	for i := range dev {
		dev[i], _ = strconv.Atoi(d[i+1])
	}
	// X.Y.Z-dev > last exactly when X.Y.Z > last; the patch after it is
	// the smallest such, so no release can fall between.
	if want := [3]int{last[0], last[1], last[2] + 1}; dev != want {
		t.Errorf("DevVersion %s, want %d.%d.%d-dev (the patch after the last release %d.%d.%d)",
			DevVersion, want[0], want[1], want[2], last[0], last[1], last[2])
	}
}
