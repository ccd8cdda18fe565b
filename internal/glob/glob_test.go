package glob

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		p, s string
		ok   bool
	}{
		{"*", "", true}, {"*", "abc", true}, {"a*c", "abbbc", true}, {"a*c", "abcd", false},
		{"a?c", "abc", true}, {"a?c", "ac", false}, {"*:B*", "SR:BPM", true}, {"x", "x", true},
		{"x", "xy", false}, {"**a", "ba", true}, {"a*b*c", "aXbYbZc", true}, {"a*b*c", "aXc", false},
		{"", "", true}, {"", "a", false}, {"?", "", false},
		// '?' is one character, not one byte.
		{"T?C", "TµC", true}, {"T??C", "TµC", false}, {"*µ", "aµ", true},
		{"LINAC:SECRET?", "LINAC:SECRET1", true}, {"LINAC:SECRET?", "LINAC:SECRET", false},
		{"rec.*", "rec.VAL", true}, {"rec.VAL", "recXVAL", false},
	} {
		if got := Match(c.p, c.s); got != c.ok {
			t.Errorf("Match(%q, %q) = %v, want %v", c.p, c.s, got, c.ok)
		}
	}
}

// FuzzMatch checks Match against the regular expression the pattern
// stands for.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{{"a*c", "abc"}, {"?µ*", "xµyz"}, {"**?", "é"}, {"*:B?M", "SR:BPM"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, p, s string) {
		// The regular expression reads invalid UTF-8 as U+FFFD, so two
		// different bad bytes would "match"; Match compares bytes.
		if len(p) > 64 || len(s) > 256 || !utf8.ValidString(p) || !utf8.ValidString(s) {
			return
		}
		var b strings.Builder
		b.WriteString(`(?s)^`)
		for _, r := range p {
			switch r {
			case '*':
				b.WriteString(".*")
			case '?':
				b.WriteString(".")
			default:
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		b.WriteString("$")
		want := regexp.MustCompile(b.String()).MatchString(s)
		if got := Match(p, s); got != want {
			t.Fatalf("Match(%q, %q) = %v, regexp says %v", p, s, got, want)
		}
	})
}
