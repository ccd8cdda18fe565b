// Command pvans is the PVAccess name-server daemon. It only wires the parts
// in internal/ together: subcommands, flags, signals and systemd notify.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// subcommand is one of pvans's commands. The usage text, pvans(1) and the completion
// scripts are written from this list.
type subcommand struct {
	name, args, summary string
	usage               string // the synopsis in the usage text, if not name and args
	fn                  func(args []string, stdout, stderr io.Writer) int
	hasFlags            bool            // fn parses flags with parseFlags
	files               map[string]bool // flags whose value is a file name
	hidden              bool            // not in the usage text, the page or the completions
}

var commands []subcommand

// settingFiles are the daemon's flags that name a file or directory.
var settingFiles = map[string]bool{"config": true, "snapshot-path": true, "static-names-dir": true}

func init() {
	// Assigned here, not at declaration: cmdHelp and cmdCompletion read the
	// list, and a declaration's initializer may not refer to itself.
	commands = []subcommand{
		{name: "run", args: "", summary: "run the daemon (the default)", fn: cmdRun, hasFlags: true, files: settingFiles},
		{name: "relay", summary: "relay the beacons heard here to central pvans (relay.to): no name server, no HTTP unless set", fn: cmdRelay, hasFlags: true, files: settingFiles},
		{name: "demo", summary: "run pvans and a simulated site on loopback", fn: cmdDemo, hasFlags: true},
		{name: "query", args: "NAME...", summary: "resolve names through a name server over TCP", fn: cmdQuery, hasFlags: true,
			usage: "query [--server H:P] NAME..."},
		{name: "list", summary: "what a running daemon knows (from its HTTP API)", fn: cmdList, hasFlags: true,
			usage: "list [--api URL] [--servers|--names GLOB|--duplicates]"},
		{name: "check-config", summary: "validate and print the effective configuration", fn: cmdCheckConfig, hasFlags: true,
			files: settingFiles},
		{name: "version", summary: "print version, commit, build date and Go (also -V)",
			fn: func(_ []string, stdout, _ io.Writer) int { return cmdVersion(stdout) }},
		{name: "completion", args: "bash|zsh", summary: "print the shell completion script", fn: cmdCompletion},
		{name: "man", args: "1|5", summary: "print the pvans(1) or pvans.yaml(5) manual page", fn: cmdMan, hidden: true},
		{name: "healthz", args: "[URL]", summary: "exit 0 if a daemon's /healthz answers OK (container health checks)", fn: cmdHealthz, hidden: true,
			hasFlags: true, files: map[string]bool{"ca-file": true, "cert-file": true, "key-file": true}},
		{name: "help", summary: "print this text", fn: func(_ []string, stdout, _ io.Writer) int { fmt.Fprint(stdout, usageText()); return 0 }},
	}
}

func usageText() string {
	var b strings.Builder
	b.WriteString("pvans: a PVAccess name server for EPICS sites\n\nUsage:\n")
	for _, c := range commands {
		if c.hidden {
			continue
		}
		syn := c.usage
		if syn == "" {
			syn = c.name
			if c.hasFlags {
				syn += " [flags]"
			}
			syn = strings.TrimSpace(syn + " " + c.args)
		}
		if c.name == "run" {
			syn = "[run] [flags]"
		}
		if len(syn) > 28 {
			fmt.Fprintf(&b, "  pvans %s\n  %35s%s\n", syn, "", c.summary)
		} else {
			fmt.Fprintf(&b, "  pvans %-29s%s\n", syn, c.summary)
		}
	}
	b.WriteString(`
Run "pvans run -h" for the daemon's flags. Every flag also has a YAML key
(--config FILE) and many have EPICS_* environment variables; see
pvans.yaml(5) and docs/configuration.md.
`)
	return b.String()
}

// run dispatches a subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && isVersionFlag(args[0]) {
		return cmdVersion(stdout)
	}
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		// The commands; "pvans run -h" lists the daemon's flags.
		fmt.Fprint(stdout, usageText())
		return 0
	}
	cmd := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	if cmd == "run" && len(args) == 1 && isVersionFlag(args[0]) {
		return cmdVersion(stdout)
	}
	for _, c := range commands {
		if c.name == cmd {
			return c.fn(args, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "pvans: unknown command %q\n\n%s", cmd, usageText())
	return 2
}
