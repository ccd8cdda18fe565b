package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Golden compares got, the text of a golden file, with the file at path
// (relative to the test's package directory), or writes got there when
// update is set (the test's -update flag). The text is entries separated
// by blank lines, each opening with a line that names it (a "# " comment
// saying what the entry is): a difference is reported entry by entry, so a
// change of behaviour reads as the cases it changed.
func Golden(tb testing.TB, path, got string, update bool) {
	tb.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tb.Fatal(err)
		}
		tb.Logf("wrote %s", path)
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (write it with -update)", err)
	}
	want := string(b)
	if got == want {
		return
	}
	wantE, gotE := goldenEntries(want), goldenEntries(got)
	var report []string
	seen := map[string]bool{}
	for _, e := range wantE {
		seen[e[0]] = true
		g := findEntry(gotE, e[0])
		switch {
		case g == nil:
			report = append(report, "gone: "+e[0])
		case !equalLines(e, g):
			report = append(report, fmt.Sprintf("changed: %s\n  want:\n    %s\n  got:\n    %s",
				e[0], strings.Join(e[1:], "\n    "), strings.Join(g[1:], "\n    ")))
		}
	}
	for _, e := range gotE {
		if !seen[e[0]] {
			report = append(report, "new: "+e[0]+"\n    "+strings.Join(e[1:], "\n    "))
		}
	}
	if len(report) == 0 {
		report = append(report, "the same entries in another order or spacing")
	}
	tb.Errorf("%s differs from this code's output in %d place(s) (-update rewrites it):\n%s",
		path, len(report), strings.Join(report, "\n"))
}

// goldenEntries splits a golden text into its entries: runs of non-blank
// lines.
func goldenEntries(s string) [][]string {
	var out [][]string
	var cur []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == "" {
			if len(cur) > 0 {
				out = append(out, cur)
				cur = nil
			}
			continue
		}
		cur = append(cur, l)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func findEntry(es [][]string, name string) []string {
	for _, e := range es {
		if e[0] == name {
			return e
		}
	}
	return nil
}

func equalLines(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
