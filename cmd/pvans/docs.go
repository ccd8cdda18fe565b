package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/pvans-project/pvans/internal/buildinfo"
	"github.com/pvans-project/pvans/internal/clidoc"
	"github.com/pvans-project/pvans/internal/config"
)

// flagCollector, passed as a command's stderr, receives the command's flag
// set from parseFlags instead of the command running.
type flagCollector struct {
	io.Writer
	fs *flag.FlagSet
}

// manual describes the visible commands with their real flags.
func manual() clidoc.Manual {
	b := buildinfo.Read()
	m := clidoc.Manual{Version: b.Version, Settings: config.References()}
	if len(b.Date) >= 10 && b.Date != buildinfo.Unknown {
		m.Date = b.Date[:10]
	}
	for _, c := range commands {
		if c.hidden {
			continue
		}
		d := clidoc.Command{Name: c.name, Args: c.args, Summary: c.summary, Files: c.files}
		if c.hasFlags {
			fc := &flagCollector{Writer: io.Discard}
			c.fn(nil, io.Discard, fc)
			if fc.fs == nil {
				panic("pvans: command " + c.name + " did not hand over its flags")
			}
			d.Flags = clidoc.FlagsOf(fc.fs, m.Settings)
		}
		m.Commands = append(m.Commands, d)
	}
	return m
}

// cmdCompletion prints the bash or zsh completion script.
func cmdCompletion(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: pvans completion bash|zsh")
		return 2
	}
	switch args[0] {
	case "bash":
		fmt.Fprint(stdout, clidoc.Bash(manual()))
	case "zsh":
		fmt.Fprint(stdout, clidoc.Zsh(manual()))
	default:
		fmt.Fprintf(stderr, "pvans completion: no completion for %q (bash or zsh)\n", args[0])
		return 2
	}
	return 0
}

// cmdMan prints a manual page: 1 is pvans(1), 5 is pvans.yaml(5).
func cmdMan(args []string, stdout, stderr io.Writer) int {
	page := ""
	if len(args) == 1 {
		page = strings.TrimPrefix(strings.TrimPrefix(args[0], "pvans."), "yaml.")
	}
	switch page {
	case "1":
		fmt.Fprint(stdout, clidoc.ManPage1(manual()))
	case "5":
		fmt.Fprint(stdout, clidoc.ManPage5(manual()))
	default:
		fmt.Fprintln(stderr, "usage: pvans man 1|5 (pvans(1) or pvans.yaml(5))")
		return 2
	}
	return 0
}
