// Package commits checks the commit-message habit CONTRIBUTING.md asks
// for: a subject of at most 72 characters, so that git log --oneline and
// git shortlog stay readable (the why goes in the body).
package commits

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// base is the last commit before the rule was checked. The history up to
// it is kept as it was written (subjects of up to 676 characters); the
// rule holds for every commit after it.
const base = "ee79062"

// maxSubject is CONTRIBUTING.md's limit, in characters.
const maxSubject = 72

func TestSubjectsAtMost72(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(filepath.Dir(wd))
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		return strings.TrimSpace(string(out)), err
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("skipped: no git command to read the history with")
	}
	if _, err := git("rev-parse", "--git-dir"); err != nil {
		t.Skip("skipped: not a git checkout (a source archive has no history to check)")
	}
	if shallow, _ := git("rev-parse", "--is-shallow-repository"); shallow == "true" {
		t.Skip("skipped: a shallow clone lacks the history since " + base + "; clone in full to check it")
	}
	if _, err := git("cat-file", "-e", base+"^{commit}"); err != nil {
		t.Skip("skipped: the history lacks " + base + ", the commit the rule starts after")
	}
	log, err := git("log", "--format=%h %s", base+"..HEAD")
	if err != nil {
		t.Fatalf("git log %s..HEAD: %v", base, err)
	}
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if line == "" {
			continue
		}
		n++
		hash, subject, _ := strings.Cut(line, " ")
		if l := utf8.RuneCountInString(subject); l > maxSubject {
			t.Errorf("commit %s: subject of %d characters, at most %d (CONTRIBUTING.md, \"Commits\"): %q", hash, l, maxSubject, subject)
		}
	}
	t.Logf("%d commits after %s checked", n, base)
}
