package config

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/pvans-project/pvans/internal/glob"
)

// NamePattern matches PV names for access control. "re:EXPR" is a regular
// expression that must match the whole name; anything else is a glob where
// * matches any run of characters and ? one character (PV names are full of
// ':' and '.', so no character is special to the glob but those two); the
// glob is internal/glob, the one the name listings use.
type NamePattern struct {
	text   string
	exact  bool   // no wildcard: compare strings
	prefix string // "LITERAL*": compare the start, the common case
	glob   bool   // any other glob
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
	if !glob.Has(s) {
		return NamePattern{text: s, exact: true}, nil
	}
	if lit, ok := strings.CutSuffix(s, "*"); ok && !glob.Has(lit) {
		return NamePattern{text: s, prefix: lit}, nil
	}
	return NamePattern{text: s, glob: true}, nil
}

// Match reports whether name matches the pattern.
func (p *NamePattern) Match(name string) bool {
	if p.exact {
		return name == p.text
	}
	if p.glob {
		return glob.Match(p.text, name)
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
