package clidoc

import (
	"fmt"
	"strings"
)

// roff escapes text for a manual page: a backslash is \e, a line may not
// start with a control character, and a hyphen in an option is \-.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}

// opt is a flag, command or key in bold with its hyphens as minus signs,
// so it can be copied from the rendered page.
func opt(s string) string { return `\fB` + strings.ReplaceAll(roff(s), "-", `\-`) + `\fR` }

func header(b *strings.Builder, name string, section int, m Manual, what string) {
	fmt.Fprintf(b, ".TH %s %d \"%s\" \"pvans %s\" \"%s\"\n", strings.ToUpper(name), section, m.Date, m.Version, "pvans manual")
	fmt.Fprintf(b, ".SH NAME\n%s \\- %s\n", strings.ReplaceAll(name, "-", `\-`), what)
}

// ManPage1 is pvans(1): the commands and their flags.
func ManPage1(m Manual) string {
	var b strings.Builder
	header(&b, "pvans", 1, m, "PVAccess name server for EPICS sites")
	b.WriteString(".SH SYNOPSIS\n")
	for _, c := range m.Commands {
		fmt.Fprintf(&b, "%s %s", opt("pvans"), opt(c.Name))
		if len(c.Flags) > 0 {
			b.WriteString(" [\\fIflags\\fR]")
		}
		if c.Args != "" {
			fmt.Fprintf(&b, " %s", roff(c.Args))
		}
		b.WriteString("\n.br\n")
	}
	b.WriteString(`.SH DESCRIPTION
pvans answers PVAccess name searches (UDP and TCP) for the servers of an
EPICS site: it learns which server holds which channel name and answers
searches for them, so clients configured with
.B EPICS_PVA_NAME_SERVERS
find channels without broadcasts. With no command, pvans runs the daemon.
.PP
Every setting of the daemon has a key in the YAML file given with
` + opt("--config") + `, a flag, and often an EPICS environment variable;
pvans.yaml(5) lists them all. From lowest to highest precedence: defaults,
the file, the environment, the flags written on the command line.
.SH COMMANDS
`)
	for _, c := range m.Commands {
		fmt.Fprintf(&b, ".SS %s\n%s\n", opt("pvans "+c.Name), roff(sentence(c.Summary)))
		var settings int
		for _, f := range c.Flags {
			if f.Setting != "" {
				settings++
				continue
			}
			fmt.Fprintf(&b, ".TP\n%s", opt(dashes(f.Name)))
			if f.Arg != "" {
				fmt.Fprintf(&b, " \\fI%s\\fR", roff(f.Arg))
			}
			fmt.Fprintf(&b, "\n%s", roff(sentence(f.Usage)))
			if f.Arg != "" && f.Default != "" {
				fmt.Fprintf(&b, " Default: %s.", roff(f.Default))
			}
			b.WriteString("\n")
		}
		if settings > 0 {
			fmt.Fprintf(&b, ".PP\nand one flag per setting (%d), listed under SETTING FLAGS.\n", settings)
		}
	}
	b.WriteString(".SH SETTING FLAGS\nEach flag sets the configuration key beside it; pvans.yaml(5) gives its meaning, default and environment variables.\nA yes/no flag may be written alone or as \\fB\\-\\-flag=false\\fR; a list is one whitespace-separated argument.\n")
	for _, r := range m.Settings {
		fmt.Fprintf(&b, ".TP\n%s \\fI%s\\fR\n%s\n", opt("--"+r.Flag), valueKind(r), opt(r.Key))
	}
	b.WriteString(".SH ENVIRONMENT\nThe EPICS variables keep their PVXS meanings; where two are given, the first one set wins. An empty variable counts as unset.\n")
	for _, r := range m.Settings {
		for _, e := range r.Env {
			fmt.Fprintf(&b, ".TP\n.B %s\n%s\n", e, opt(r.Key))
		}
	}
	b.WriteString(`.SH SIGNALS
.TP
.B SIGHUP
load the configuration again; a refused configuration changes nothing, and a
changed setting marked "restart" in pvans.yaml(5) is logged and waits for the
next start.
.TP
.BR SIGTERM ", " SIGINT
stop gracefully, writing the registry snapshot.
.SH EXIT STATUS
0 on success, 1 when the configuration is refused or the daemon cannot
start, 2 for a command-line mistake.
.SH FILES
.TP
.I /etc/pvans/pvans.yaml
the configuration the packaged systemd unit gives
` + opt("--config") + `.
.TP
.I /var/lib/pvans/registry.snapshot
the registry snapshot (` + opt("snapshot.path") + `), read at start.
.TP
.I /usr/share/doc/pvans/
operations.md, configuration.md, upgrading.md, SECURITY.md, the changelog and
the licence.
.SH SEE ALSO
.BR pvans.yaml (5),
.BR systemctl (1)
`)
	return b.String()
}

// ManPage5 is pvans.yaml(5): every setting from the settings table.
func ManPage5(m Manual) string {
	var b strings.Builder
	header(&b, "pvans.yaml", 5, m, "configuration file of the pvans name server")
	b.WriteString(`.SH SYNOPSIS
.I /etc/pvans/pvans.yaml
.SH DESCRIPTION
The file is YAML with one mapping per section, each holding snake_case keys:
.PP
.RS
.nf
pva:
  server_port: 5075
probe:
  timeout: 90s
.fi
.RE
.PP
Unknown sections and keys, keys given twice, and lists where one value is
expected are errors, reported with the line; a key of a setting that is now
a constant is ignored with a warning naming the constant (see upgrading.md).
An empty file or section means all defaults. Every key is also a flag of
.BR pvans (1)
and many are EPICS environment variables; flags override the environment,
which overrides the file. ` + opt("pvans check-config --config FILE") + `
prints every effective value and where it came from.
.PP
A yes/no value is YES/NO, true/false or 1/0 in any case. A duration is a Go
duration (90s, 5m) or a number of seconds. A byte count takes an optional
KiB, MiB or GiB suffix. A list is a YAML sequence or one string split on
whitespace. Settings marked "restart" take effect at the next start; the
others are applied by a reload (SIGHUP).
`)
	cur := ""
	for _, r := range m.Settings {
		if r.Section != cur {
			cur = r.Section
			fmt.Fprintf(&b, ".SH %s\n", strings.ToUpper(roff(cur)))
		}
		fmt.Fprintf(&b, ".TP\n%s (%s)\n%s\n.br\n", opt(r.Key), valueKind(r), roff(sentence(r.Usage)))
		fmt.Fprintf(&b, "Flag %s. ", opt("--"+r.Flag))
		if len(r.Env) > 0 {
			fmt.Fprintf(&b, "Environment %s. ", roff(envList(r)))
		}
		fmt.Fprintf(&b, "Default: %s.", roff(defaultText(r)))
		if r.NeedsRestart {
			b.WriteString(" Needs a restart.")
		}
		b.WriteString("\n")
	}
	b.WriteString(`.SH FILES
.TP
.I /etc/pvans/pvans.yaml
the packaged configuration, which sets every key to its default with a
comment.
.TP
.I /usr/share/doc/pvans/configuration.md
the same reference with the address-list, IPv6, reload and access-control
rules in full.
.SH SEE ALSO
.BR pvans (1)
`)
	return b.String()
}

// sentence starts s with a capital and ends it with a full stop.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}
