// Command pvans is the PVAccess name-server daemon. It only wires the parts
// in internal/ together: subcommands, flags, signals and systemd notify.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usageText = `pvans: a PVAccess name server for EPICS sites

Usage:
  pvans [run] [flags]                  run the daemon (the default)
  pvans demo [flags]                   run pvans and a simulated site on loopback
  pvans query [--server H:P] NAME...   resolve names through a name server over TCP
  pvans list [--api URL] [--servers|--names GLOB|--duplicates]
                                       what a running daemon knows (from its HTTP API)
  pvans check-config [flags]           validate and print the effective configuration
  pvans version | --version | -V       print the version, commit, build date and Go version

Run "pvans run -h" for the daemon's flags. Every flag also has a YAML key
(--config FILE) and many have EPICS_* environment variables; see
docs/configuration.md.
`

// run dispatches a subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	if cmd == "run" && len(args) == 1 && isVersionFlag(args[0]) {
		return cmdVersion(stdout)
	}
	switch cmd {
	case "run":
		return cmdRun(args, stdout, stderr)
	case "demo":
		return cmdDemo(args, stdout, stderr)
	case "query":
		return cmdQuery(args, stdout, stderr)
	case "list":
		return cmdList(args, stdout, stderr)
	case "check-config":
		return cmdCheckConfig(args, stdout, stderr)
	case "healthz":
		return cmdHealthz(args, stdout, stderr)
	case "version":
		return cmdVersion(stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usageText)
		return 0
	}
	fmt.Fprintf(stderr, "pvans: unknown command %q\n\n%s", cmd, usageText)
	return 2
}
