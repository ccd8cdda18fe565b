// Package layout checks the shape ARCHITECTURE.md states: which of pvans's
// own packages each package may import, and that the files, directories
// and declarations its prose names exist (names_test.go). The table there
// is the rule; this test reads it and every production import, so the
// document and the code cannot drift apart.
package layout

import (
	"bufio"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/pvans-project/pvans/"

// rootDir is the repository root, two levels above this package.
func rootDir(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(filepath.Dir(wd))
}

// allowed reads ARCHITECTURE.md's imports table: package → the internal
// packages (short names) it may import.
func allowed(t *testing.T, root string) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules := map[string][]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "imports table: checked by test/layout") {
			in = true
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if len(rules) > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("ARCHITECTURE.md imports table: %q has %d cells, want 3", line, len(cells))
		}
		pkg := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if !strings.HasPrefix(pkg, "internal/") {
			continue // the header and its rule
		}
		var may []string
		if v := strings.TrimSpace(cells[2]); v != "nothing" {
			for _, p := range strings.Split(v, ",") {
				may = append(may, strings.TrimSpace(p))
			}
		}
		rules[pkg] = may
	}
	if len(rules) == 0 {
		t.Fatal("ARCHITECTURE.md has no imports table")
	}
	return rules
}

// imports returns the pvans packages the non-test Go files of dir import,
// as paths relative to the module.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var out []string
	fs := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fs, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			p := strings.Trim(im.Path.Value, `"`)
			if rel, ok := strings.CutPrefix(p, module); ok && !slices.Contains(out, rel) {
				out = append(out, rel)
			}
		}
	}
	slices.Sort(out)
	return out
}

// packageDirs lists the directories under root/sub holding non-test Go
// files, as paths relative to root.
func packageDirs(t *testing.T, root, sub string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(filepath.Join(root, sub), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		if !slices.Contains(dirs, rel) {
			dirs = append(dirs, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func TestInternalImportsFollowTheTable(t *testing.T) {
	root := rootDir(t)
	rules := allowed(t, root)
	for _, dir := range packageDirs(t, root, "internal") {
		may, listed := rules[dir]
		if !listed {
			t.Errorf("%s is not in ARCHITECTURE.md's imports table", dir)
			continue
		}
		for _, im := range imports(t, filepath.Join(root, dir)) {
			short, ok := strings.CutPrefix(im, "internal/")
			if !ok {
				t.Errorf("%s imports %s: nothing under internal/ may import cmd/ or test/", dir, im)
				continue
			}
			if !slices.Contains(may, short) {
				t.Errorf("%s imports %s, which ARCHITECTURE.md does not allow it (may import: %v)", dir, im, may)
			}
		}
	}
	for pkg := range rules {
		if _, err := os.Stat(filepath.Join(root, pkg)); err != nil {
			t.Errorf("ARCHITECTURE.md lists %s, which does not exist", pkg)
		}
	}
}

func TestCommandsDoNotImportTestSupport(t *testing.T) {
	root := rootDir(t)
	for _, dir := range packageDirs(t, root, "cmd") {
		for _, im := range imports(t, filepath.Join(root, dir)) {
			if im == "internal/testutil" || strings.HasPrefix(im, "internal/testutil/") || strings.HasPrefix(im, "test/") {
				t.Errorf("%s imports %s, which is test support", dir, im)
			}
		}
	}
}

// TestTableCatchesAForbiddenImport shows the check can fail: a package
// that imports something the table does not allow it is reported.
func TestTableCatchesAForbiddenImport(t *testing.T) {
	dir := t.TempDir()
	src := "package x\n\nimport _ \"" + module + "internal/daemon\"\n"
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := imports(t, dir)
	rules := allowed(t, rootDir(t))
	if !slices.Equal(got, []string{"internal/daemon"}) || slices.Contains(rules["internal/pva"], "daemon") {
		t.Fatalf("imports = %v; pva may import %v", got, rules["internal/pva"])
	}
}

// suitesIn returns the `test/NAME` suites a Markdown table lists.
func suitesIn(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "| `test/"); ok {
			if name, _, ok := strings.Cut(rest, "`"); ok && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestSuiteTablesComplete: README.md and ARCHITECTURE.md each list every
// suite under test/ (a directory with Go files), and nothing else.
func TestSuiteTablesComplete(t *testing.T) {
	root := rootDir(t)
	entries, err := os.ReadDir(filepath.Join(root, "test"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range entries {
		if gos, _ := filepath.Glob(filepath.Join(root, "test", e.Name(), "*.go")); e.IsDir() && len(gos) > 0 {
			want = append(want, e.Name())
		}
	}
	slices.Sort(want)
	for _, doc := range []string{"README.md", "ARCHITECTURE.md"} {
		got := suitesIn(t, filepath.Join(root, doc))
		if doc == "README.md" {
			// README leaves out the harness, which has no tests.
			got = append(got, "harness")
			slices.Sort(got)
			got = slices.Compact(got)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s lists the suites %v; test/ has %v", doc, got, want)
		}
	}
}
