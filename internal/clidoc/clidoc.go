// Package clidoc writes pvans's manual pages and shell completion scripts
// from the commands' real flag sets and the configuration's settings table,
// so what they say cannot drift from what the binary accepts. The release
// script and the package test run `pvans man` and `pvans completion` on the
// very binary they package.
package clidoc

import (
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/pvans-project/pvans/internal/config"
)

// Flag is one command-line flag.
type Flag struct {
	Name    string // without dashes
	Arg     string // the value's name, "" for a yes/no flag
	Usage   string
	Default string
	Setting string // the configuration key the flag sets, if any
}

// Command is one subcommand.
type Command struct {
	Name    string
	Args    string // synopsis after the flags, e.g. "NAME..."
	Summary string
	Flags   []Flag
	Files   map[string]bool // flags whose value is a file name
}

// Manual is what the pages and scripts describe.
type Manual struct {
	Version  string
	Date     string // YYYY-MM-DD for the pages' footer; "" if unknown
	Commands []Command
	Settings []config.Reference
}

// FlagsOf lists fs's flags in name order; a flag named after a setting's
// flag is tied to that setting. A removed setting's flag, still parsed
// with a warning, is left out.
func FlagsOf(fs *flag.FlagSet, settings []config.Reference) []Flag {
	byFlag := map[string]string{}
	for _, s := range settings {
		byFlag[s.Flag] = s.Key
	}
	var out []Flag
	fs.VisitAll(func(f *flag.Flag) {
		if config.RemovedFlag(f.Name) {
			return
		}
		arg, usage := flag.UnquoteUsage(f)
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			arg = ""
		} else if arg == "" {
			arg = "value"
		}
		out = append(out, Flag{Name: f.Name, Arg: arg, Usage: usage, Default: f.DefValue, Setting: byFlag[f.Name]})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// dashes writes a flag as the pages and scripts give it: -V, -v with one
// dash, every other with two (Go's flag package takes either).
func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// Settings' values by kind, for the pages.
func valueKind(r config.Reference) string {
	switch {
	case r.Bool:
		return "yes/no"
	case r.List:
		return "list"
	}
	return "value"
}

func envList(r config.Reference) string { return strings.Join(r.Env, ", then ") }

func defaultText(r config.Reference) string {
	switch {
	case r.Derived != "":
		return fmt.Sprintf("%s (%s)", r.Default, r.Derived)
	case r.Default == "":
		return "empty"
	}
	return r.Default
}
