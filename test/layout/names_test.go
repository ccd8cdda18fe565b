package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// ARCHITECTURE.md's prose names files, directories and declarations in
// backquotes (`daemon/flows.go`, `internal/probe`, `udpsearch.Resolver`,
// `daemon.probeSink.Listed`). A name that no longer exists is a sentence
// that no longer says what the code does: the check below finds every
// such name and looks it up.

var (
	quoted   = regexp.MustCompile("`([^`\n]+)`")
	goFile   = regexp.MustCompile(`^[a-z0-9_]+(/[a-z0-9_]+)*\.go$`)
	treePath = regexp.MustCompile(`^(internal|cmd|test)(/[a-z0-9_-]+)+$`)
	goName   = regexp.MustCompile(`^\*?([a-z0-9]+)((\.[A-Za-z_][A-Za-z0-9_]*)+)$`)
)

// declared returns the top-level names and the method names declared in
// the non-test Go files of dir.
func declared(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	names := map[string]bool{}
	fs := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fs, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				names[d.Name.Name] = true
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					}
				}
			}
		}
	}
	return names
}

// missingNames returns what text names in backquotes that root does not
// have: a Go file (relative to root or to root/internal), a directory
// under internal/, cmd/ or test/, or a declaration of an internal package
// (pkg.Name, pkg.Type.Method; each part must be declared in the package).
// Quoted text of another kind (settings, commands) is not checked.
func missingNames(t *testing.T, root, text string) []string {
	t.Helper()
	var missing []string
	decls := map[string]map[string]bool{}
	for _, m := range quoted.FindAllStringSubmatch(text, -1) {
		q := m[1]
		switch {
		case goFile.MatchString(q):
			if !exists(filepath.Join(root, q)) && !exists(filepath.Join(root, "internal", q)) {
				missing = append(missing, q)
			}
		case treePath.MatchString(q):
			if !exists(filepath.Join(root, q)) {
				missing = append(missing, q)
			}
		case goName.MatchString(q):
			sm := goName.FindStringSubmatch(q)
			dir := filepath.Join(root, "internal", sm[1])
			if !exists(dir) {
				continue // not a package: a setting such as access.trusted_relays
			}
			if decls[sm[1]] == nil {
				decls[sm[1]] = declared(t, dir)
			}
			for _, part := range strings.Split(strings.TrimPrefix(sm[2], "."), ".") {
				if !decls[sm[1]][part] {
					missing = append(missing, q)
					break
				}
			}
		}
	}
	return missing
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestArchitectureNamesExist(t *testing.T) {
	root := rootDir(t)
	b, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range missingNames(t, root, string(b)) {
		t.Errorf("ARCHITECTURE.md names `%s`, which the code does not have", q)
	}
}

// TestArchitectureNamesCheckCanFail: a name that is gone is reported, one
// that exists is not, and a quoted setting is left alone.
func TestArchitectureNamesCheckCanFail(t *testing.T) {
	text := "`daemon/flows.go` `daemon/nosuch.go` `internal/probe` `internal/nosuch` " +
		"`probe.Sink` `probe.Prober.Probe` `probe.NoSuchThing` `probe.Prober.NoSuchMethod` `access.trusted_relays`"
	got := missingNames(t, rootDir(t), text)
	want := []string{"daemon/nosuch.go", "internal/nosuch", "probe.NoSuchThing", "probe.Prober.NoSuchMethod"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("missing = %v, want %v", got, want)
	}
}
