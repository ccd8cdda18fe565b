package config

import "strings"

// Reference is one setting as the reference documents print it: the table
// in docs/configuration.md, pvans.yaml(5) and the flags in pvans(1) all come
// from References, so they cannot disagree with the code or each other.
type Reference struct {
	Key          string   // file key, "section.name"
	Section      string   // the key's section
	Flag         string   // flag name without dashes
	Env          []string // environment variables, the first set one wins
	Default      string   // the default as written in a file; "" for empty
	Derived      string   // what a derived default (auto) comes to with the other defaults
	NeedsRestart bool     // a reload (SIGHUP) does not apply it
	Bool, List   bool     // a yes/no flag; a whitespace-separated list
	Usage        string   // what the setting means
}

// References returns every setting in the table's order (grouped by
// section).
func References() []Reference {
	d := Defaults()
	out := make([]Reference, 0, len(specs))
	for _, s := range specs {
		sec, _, _ := strings.Cut(s.key, ".")
		restart, _ := NeedsRestart(s.key)
		r := Reference{Key: s.key, Section: sec, Flag: s.flag, Env: s.env, Default: s.get(&d),
			NeedsRestart: restart, Bool: s.isBool, List: s.isList, Usage: s.usage}
		out = append(out, r)
	}
	return out
}
