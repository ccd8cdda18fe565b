package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pvans-project/pvans/internal/config"
)

// `pvans run -h` and `pvans check-config -h` are read by people: the
// common flags first, then every other flag once, one line each, under a
// header per settings section in the table's order.
func TestSettingsHelpGrouped(t *testing.T) {
	refs := config.References()
	for _, cmd := range []string{"run", "check-config"} {
		var out, errb bytes.Buffer
		if code := run([]string{cmd, "-h"}, &out, &errb); code != 0 {
			t.Fatalf("%s -h: exit %d", cmd, code)
		}
		text := errb.String()
		lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
		if !strings.HasPrefix(lines[0], "Usage: pvans ") || !strings.Contains(lines[0], cmd) && cmd != "run" {
			t.Errorf("%s -h starts %q", cmd, lines[0])
		}
		// The common block comes first, in commonFlags' order.
		commonAt := strings.Index(text, "\nCommon flags:\n")
		firstSection := strings.Index(text, "\nEPICS network (pva.*):\n")
		if commonAt < 0 || firstSection < commonAt {
			t.Fatalf("%s -h: no Common flags block before the sections:\n%s", cmd, text)
		}
		last := commonAt
		for _, f := range append([]string{"config"}, commonFlags...) {
			i := strings.Index(text, "\n  --"+f+" ")
			if i < 0 {
				i = strings.Index(text, "\n  --"+f+"\n")
			}
			if i < last || i > firstSection {
				t.Errorf("%s -h: --%s not in the common block in order", cmd, f)
			}
			last = i
		}
		// Every setting's flag once; section headers in table order.
		prevHeader := 0
		seenSec := map[string]bool{}
		for _, r := range refs {
			if n := strings.Count(text, "  --"+r.Flag+" ") + strings.Count(text, "  --"+r.Flag+"\n"); n != 1 {
				t.Errorf("%s -h: --%s appears %d times", cmd, r.Flag, n)
			}
			if seenSec[r.Section] {
				continue
			}
			seenSec[r.Section] = true
			h := strings.Index(text, "("+r.Section+".*):\n")
			if h < 0 && r.Section != "pva" {
				t.Errorf("%s -h: no header for section %s", cmd, r.Section)
			}
			if h >= 0 && h < prevHeader {
				t.Errorf("%s -h: section %s out of order", cmd, r.Section)
			}
			if h >= 0 {
				prevHeader = h
			}
		}
		// One line per flag outside the common block (three each inside
		// it) and two per section header. (With 56 settings in 18
		// sections the headers cost more than the flag package's second
		// line per flag saves, so that is no longer the bound.)
		if max := len(refs) + 3*len(commonFlags) + 2*len(seenSec) + 15; len(lines) > max {
			t.Errorf("%s -h: %d lines for %d settings; want at most %d", cmd, len(lines), len(refs), max)
		}
		for _, l := range lines {
			if n := len([]rune(l)); n > 110 {
				t.Errorf("%s -h: line of %d characters: %q", cmd, n, l)
			}
		}
	}
}
