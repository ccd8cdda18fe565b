package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/pvans-project/pvans/internal/config"
)

// commonFlags open `pvans run -h`, in this order: what a site sets first.
var commonFlags = []string{"interfaces", "server-port", "broadcast-port", "addr-list", "auto-addr-list",
	"name-servers", "static-servers", "http-listen", "web.config.file", "log-level", "snapshot-path"}

// sectionTitles name the settings sections in -h; a section missing here
// is shown by its key alone.
var sectionTitles = map[string]string{
	"pva": "EPICS network", "http": "HTTP API and metrics", "log": "logging", "snapshot": "registry snapshot",
	"registry": "registry bounds", "tcp": "TCP name-server clients", "udp": "UDP searches and beacons",
	"probe": "probing servers", "beacon": "beacon tracking", "static": "static servers and names",
	"search": "search-through", "access": "access control", "map": "address mapping",
	"rate_limit": "rate limits", "insight": "search insight",
	"discovery": "periodic discovery", "dns": "host names followed in DNS", "relay": "relaying beacons to central pvans",
}

// helpWidth is where -h cuts a setting's description: one line per flag.
const helpWidth = 100

// settingsHelp is the daemon's -h (pvans run, pvans check-config): the
// common flags with their defaults and environment variables, then every
// other flag under its settings section, one line each. The full text of
// each is in pvans.yaml(5) and docs/configuration.md.
func settingsHelp(w io.Writer, cmd string) {
	refs := config.References()
	byFlag := make(map[string]config.Reference, len(refs))
	for _, r := range refs {
		byFlag[r.Flag] = r
	}
	syn := "pvans " + cmd + " [flags]"
	if cmd == "run" {
		syn = "pvans [run] [flags]"
	}
	fmt.Fprintf(w, "Usage: %s\n\nCommon flags:\n", syn)
	fmt.Fprintf(w, "  --config FILE\n      YAML configuration file; the flags below override it\n")
	common := map[string]bool{}
	for _, f := range commonFlags {
		r, ok := byFlag[f]
		if !ok {
			continue
		}
		common[f] = true
		notes := []string{"default " + orEmpty(r.Default)}
		if len(r.Env) > 0 {
			notes = append(notes, "env "+strings.Join(r.Env, ", then "))
		}
		fmt.Fprintf(w, "  --%s%s\n      %s\n      (%s; file %s)\n", r.Flag, valueName(r), cut(r.Usage, helpWidth-6),
			strings.Join(notes, "; "), r.Key)
	}
	fmt.Fprintf(w, "  --version, -V, -v\n      print the version and exit\n")

	sec := ""
	for _, r := range refs {
		if common[r.Flag] {
			continue
		}
		if r.Section != sec {
			sec = r.Section
			title := sec + ".*"
			if t := sectionTitles[sec]; t != "" {
				title = t + " (" + title + ")"
			}
			fmt.Fprintf(w, "\n%s:\n", strings.ToUpper(title[:1])+title[1:])
		}
		name := "  --" + r.Flag
		pad := 40
		if len(name) >= pad {
			pad = len(name) + 2
		}
		fmt.Fprintf(w, "%-*s%s\n", pad, name, cut(r.Usage, helpWidth-pad))
	}
	fmt.Fprintf(w, `
Lists are one whitespace-separated string; booleans are --flag or
--flag=false. Every flag is also a key in the --config file. Full
descriptions, defaults and environment variables: pvans.yaml(5) ("pvans man
5"), docs/configuration.md. "pvans check-config" prints the values in force.
`)
}

func valueName(r config.Reference) string {
	switch {
	case r.Bool:
		return ""
	case r.List:
		return " LIST"
	}
	return " VALUE"
}

func orEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// cut shortens a description to its first clause, then to n bytes at a
// word, so a flag takes one line.
func cut(s string, n int) string {
	if i := strings.Index(s, "; "); i > 0 {
		s = s[:i]
	}
	if len(s) <= n {
		return s
	}
	i := strings.LastIndex(s[:n-1], " ")
	if i <= 0 {
		i = n - 1
	}
	return s[:i] + "…"
}
