package testutil

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// errTB records what Golden reports instead of failing the test.
type errTB struct {
	testing.TB
	errs []string
}

func (e *errTB) Helper() {}
func (e *errTB) Errorf(f string, a ...any) {
	e.errs = append(e.errs, fmt.Sprintf(f, a...))
}

func TestGoldenReportsEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "testdata", "g.txt")
	Golden(t, path, "# head\n\n# a\nx 1\n\n# b\ny 2\n\n# c\nz\n", true)
	Golden(t, path, "# head\n\n# a\nx 1\n\n# b\ny 2\n\n# c\nz\n", false)
	rec := &errTB{TB: t}
	Golden(rec, path, "# head\n\n# a\nx 1\n\n# b\ny 3\n\n# d\nw\n", false)
	if len(rec.errs) != 1 {
		t.Fatalf("%d reports: %q", len(rec.errs), rec.errs)
	}
	r := rec.errs[0]
	for _, want := range []string{"3 place(s)", "changed: # b", "y 2", "y 3", "gone: # c", "new: # d"} {
		if !strings.Contains(r, want) {
			t.Errorf("report lacks %q:\n%s", want, r)
		}
	}
	if strings.Contains(r, "# a") {
		t.Errorf("an unchanged entry reported:\n%s", r)
	}
}
