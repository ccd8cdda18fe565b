package deploy

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docRef is a reference to a section of a document, as the docs, the
// flags' help and code comments write it: docs/NAME.md, "Section", or
// inside docs/configuration.md, see "Section".
var (
	docRef  = regexp.MustCompile(`((?:docs/)?[A-Za-z]+\.md), "([^"]+)"`)
	seeRef  = regexp.MustCompile(`see "([^"]+)"`)
	heading = regexp.MustCompile(`(?m)^#{1,4} (.+)$`)
	// A bold lead of a list item ("- **Probe pool.** ...") is a section too.
	boldLead = regexp.MustCompile(`(?m)^- \*\*([^*]+?)\.?\*\*`)
	// A reference broken over lines: the newline, and a comment's //.
	wrap = regexp.MustCompile(`\s*\n\s*(?://\s*)?`)
)

// headings returns the section titles of a Markdown file, backticks and
// a trailing parenthesis-free form both accepted ("Secure PVAccess (TLS)"
// is also "Secure PVAccess").
func headings(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range append(heading.FindAllStringSubmatch(string(b), -1), boldLead.FindAllStringSubmatch(string(b), -1)...) {
		h := strings.ReplaceAll(strings.TrimSpace(m[1]), "`", "")
		out[h] = true
		if i := strings.Index(h, " ("); i > 0 {
			out[h[:i]] = true
		}
		if i := strings.Index(h, ": "); i > 0 {
			out[h[:i]] = true
		}
	}
	return out
}

// TestSectionReferencesResolve: every section a doc, a flag's help or a
// comment points to exists, so a reader who follows one finds it (the
// help once pointed to a "UDP binding" section that did not exist).
func TestSectionReferencesResolve(t *testing.T) {
	docs := map[string]map[string]bool{}
	doc := func(name string) map[string]bool {
		base := filepath.Base(name)
		p := filepath.Join(root, "docs", base)
		if base == "README.md" || base == "ARCHITECTURE.md" || base == "CHANGELOG.md" {
			p = filepath.Join(root, base)
		}
		if docs[p] == nil {
			if _, err := os.Stat(p); err != nil {
				return nil
			}
			docs[p] = headings(t, p)
		}
		return docs[p]
	}
	checked := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (d.Name() == "testdata" || d.Name() == "vendor" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".md")) || strings.HasSuffix(p, "docrefs_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		text := string(b)
		rel, _ := filepath.Rel(root, p)
		for _, m := range docRef.FindAllStringSubmatch(text, -1) {
			m[2] = wrap.ReplaceAllString(m[2], " ")
			hs := doc(m[1])
			if hs == nil {
				continue // not one of the project's documents
			}
			checked++
			if !hs[m[2]] {
				t.Errorf("%s points to %s, %q: no such section", rel, m[1], m[2])
			}
		}
		if rel == filepath.Join("docs", "configuration.md") || strings.HasPrefix(rel, filepath.Join("internal", "config")) {
			for _, m := range seeRef.FindAllStringSubmatch(text, -1) {
				m[1] = wrap.ReplaceAllString(m[1], " ")
				checked++
				if !doc("configuration.md")[m[1]] {
					t.Errorf("%s says see %q: docs/configuration.md has no such section", rel, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("only %d references checked: the patterns no longer match how the docs cite sections", checked)
	}
}
