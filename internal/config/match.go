package config

import (
	"fmt"
	"regexp"
	"strings"
)

// NamePattern matches PV names for access control. "re:EXPR" is a regular
// expression that must match the whole name; anything else is a glob where
// * matches any run of characters and ? one character (PV names are full of
// ':' and '.', so no character is special to the glob but those two).
type NamePattern struct {
	text   string
	exact  bool   // no wildcard: compare strings
	prefix string // "LITERAL*": compare the start, the common case
	re     *regexp.Regexp
}

// ParseNamePattern compiles one pattern.
func ParseNamePattern(s string) (NamePattern, error) {
	if s == "" {
		return NamePattern{}, fmt.Errorf("empty name pattern")
	}
	if expr, ok := strings.CutPrefix(s, "re:"); ok {
		re, err := regexp.Compile(`^(?:` + expr + `)$`)
		if err != nil {
			return NamePattern{}, fmt.Errorf("%q: bad regular expression: %v", s, err)
		}
		return NamePattern{text: s, re: re}, nil
	}
	if !strings.ContainsAny(s, "*?") {
		return NamePattern{text: s, exact: true}, nil
	}
	if lit, ok := strings.CutSuffix(s, "*"); ok && !strings.ContainsAny(lit, "*?") {
		return NamePattern{text: s, prefix: lit}, nil
	}
	var b strings.Builder
	b.WriteString("^")
	for _, r := range s {
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
	return NamePattern{text: s, re: regexp.MustCompile(b.String())}, nil
}

// Match reports whether name matches the pattern.
func (p *NamePattern) Match(name string) bool {
	if p.exact {
		return name == p.text
	}
	if p.re == nil {
		return p.text != "" && strings.HasPrefix(name, p.prefix)
	}
	return p.re.MatchString(name)
}

// String returns the pattern as written.
func (p NamePattern) String() string { return p.text }

func parseNamePatterns(items []string) ([]NamePattern, error) {
	var out []NamePattern
	for _, s := range items {
		p, err := ParseNamePattern(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
