package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pvans-project/pvans/internal/buildinfo"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/insight"
)

// cmdVersion prints what `pvans version`, --version, -V and -v print: the
// version on the first line, then the build's commit, date and Go.
func cmdVersion(stdout io.Writer) int {
	b := buildinfo.Read()
	fmt.Fprintf(stdout, "pvans %s\ncommit %s\ndate   %s\ngo     %s\n", b.Version, b.Commit, b.Date, b.GoVersion)
	return 0
}

// isVersionFlag reports whether arg asks for the version: --version, and
// -V and -v as most daemons take them (pvans has no verbose flag; the log
// level is --log-level).
func isVersionFlag(arg string) bool {
	switch arg {
	case "--version", "-version", "-V", "--V", "-v", "--v":
		return true
	}
	return false
}

// errUsage is a command line the flag package refused; it has said why.
var errUsage = errors.New("usage error")

// parseFlags parses args into fs. -h prints every flag; a mistake prints
// only what was wrong and where the flags are listed, not the whole list
// (the daemon has dozens of flags, which buried the one line that mattered).
//
// Given a *flagCollector as stderr, it parses nothing: it hands over fs and
// returns flag.ErrHelp, so the command returns as after -h. That is how
// `pvans man` and `pvans completion` read every command's real flags.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	return parseFlagsHelp(fs, args, stderr, nil)
}

// parseFlagsHelp is parseFlags with help, if not nil, printing -h's text
// in place of the flag package's list.
func parseFlagsHelp(fs *flag.FlagSet, args []string, stderr io.Writer, help func(io.Writer)) error {
	if c, ok := stderr.(*flagCollector); ok {
		c.fs = fs
		return flag.ErrHelp
	}
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	err := parseInterspersed(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		if help != nil {
			help(stderr)
			return err
		}
		fmt.Fprintf(stderr, "Usage of %s:\n", fs.Name())
		fs.PrintDefaults()
		return err
	case err != nil:
		fmt.Fprintf(stderr, "Run \"%s -h\" for its flags.\n", fs.Name())
		return errUsage
	}
	return nil
}

// parseInterspersed parses flags wherever they stand among the arguments,
// as an operator types them (`pvans query a b --timeout 2s`): the flag
// package alone stops at the first argument and would take "--timeout"
// and "2s" as names. "--" ends the flags; everything after it is an
// argument, for a name that starts with "-". fs.Args() then holds the
// arguments in their order.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var pos []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		left := fs.Args()
		used := len(rest) - len(left)
		if len(left) == 0 || (used > 0 && rest[used-1] == "--") {
			pos = append(pos, left...)
			break
		}
		pos = append(pos, left[0])
		rest = left[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

// loadConfig parses the daemon's flags and loads the configuration.
func loadConfig(name string, args []string, stderr io.Writer) (*config.Config, *flag.FlagSet, error) {
	fs := flag.NewFlagSet("pvans "+name, flag.ContinueOnError)
	fv := config.RegisterFlags(fs)
	version := fs.Bool("version", false, "print the version and exit (also -V, -v)")
	fs.BoolVar(version, "V", false, "print the version and exit")
	fs.BoolVar(version, "v", false, "print the version and exit")
	if err := parseFlagsHelp(fs, args, stderr, func(w io.Writer) { settingsHelp(w, name) }); err != nil {
		return nil, fs, err
	}
	if *version {
		return nil, fs, errVersion
	}
	if fs.NArg() > 0 {
		return nil, fs, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	opts := fv.Options(os.LookupEnv)
	if name == "relay" {
		opts.Profile = config.RelayProfile
	}
	cfg, err := config.Load(opts)
	return cfg, fs, err
}

var errVersion = errors.New("version requested")

func cmdCheckConfig(args []string, stdout, stderr io.Writer) int {
	cfg, _, err := loadConfig("check-config", args, stderr)
	if err != nil {
		switch {
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		case errors.Is(err, errVersion):
			return cmdVersion(stdout)
		}
		fmt.Fprintln(stderr, "pvans: configuration refused:\n"+err.Error())
		return 1
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stderr, "pvans: WARNING: setting ignored: "+w)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tVALUE\tFROM\tON RELOAD")
	for _, s := range cfg.Provenance() {
		v := s.Value
		if v == "" {
			v = `""`
		}
		reload := "applied"
		if restart, _ := config.NeedsRestart(s.Key); restart {
			reload = "needs restart"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Key, v, s.Source, reload)
	}
	_ = tw.Flush()
	fmt.Fprintln(stdout, "configuration OK; settings marked \"needs restart\" take effect at the next start, the others at a reload (SIGHUP)")
	return 0
}

// cmdList asks a running daemon's HTTP API what it knows.
func cmdList(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pvans list", flag.ContinueOnError)
	api := fs.String("api", "http://127.0.0.1:9076", "the daemon's HTTP API `URL`")
	servers := fs.Bool("servers", false, "list servers (the default)")
	names := fs.String("names", "", "list names matching `GLOB`")
	limit := fs.Int("limit", 1000, "at most this many rows (the API caps it at 10000)")
	dups := fs.Bool("duplicates", false, "list duplicate names")
	unresolved := fs.Bool("unresolved", false, "list names searched for and not found, most searched first")
	clients := fs.Bool("clients", false, "list the busiest searching clients")
	window := fs.String("window", "1h", "with --unresolved or --clients: `1m or 1h`")
	asJSON := fs.Bool("json", false, "print the API's JSON")
	if err := parseFlags(fs, args, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	picked := 0
	for _, on := range []bool{*servers, *dups, *names != "", *unresolved, *clients} {
		if on {
			picked++
		}
	}
	if picked > 1 {
		fmt.Fprintln(stderr, "pvans list: give at most one of --servers, --names, --duplicates, --unresolved, --clients")
		return 2
	}
	path := fmt.Sprintf("/v1/servers?limit=%d", *limit)
	switch {
	case *dups:
		path = fmt.Sprintf("/v1/duplicates?limit=%d", *limit)
	case *names != "":
		path = "/v1/names?match=" + url.QueryEscape(*names) + fmt.Sprintf("&limit=%d", *limit)
	case *unresolved:
		path = "/v1/insight/unresolved?window=" + url.QueryEscape(*window) + fmt.Sprintf("&limit=%d", min(*limit, httpapi.MaxInsightLimit))
	case *clients:
		path = "/v1/insight/clients?window=" + url.QueryEscape(*window) + fmt.Sprintf("&limit=%d", min(*limit, httpapi.MaxInsightLimit))
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(strings.TrimRight(*api, "/") + path)
	if err != nil {
		fmt.Fprintf(stderr, "pvans list: %v (is the daemon running with --http-listen at %s?)\n", err, *api)
		return 1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "pvans list: %s: %s %s\n", termSafe(path), termSafe(resp.Status), termSafe(strings.TrimSpace(string(body))))
		return 1
	}
	if resp.Header.Get(httpapi.MoreHeader) == "true" {
		defer fmt.Fprintln(stderr, "pvans list: more names match than shown (--limit, or a narrower GLOB)")
	}
	if total, err := strconv.Atoi(resp.Header.Get(httpapi.TotalHeader)); err == nil {
		// The API answers a page (docs/api.md); say what was cut.
		defer func() {
			if shown := countRows(body); shown < total {
				fmt.Fprintf(stderr, "pvans list: %d more not shown (--limit; the API pages with offset, docs/api.md)\n", total-shown)
			}
		}()
	}
	if *asJSON {
		_, _ = stdout.Write(termSafeJSON(body))
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	defer tw.Flush()
	switch {
	case *dups:
		var ds []httpapi.Duplicate
		if err := json.Unmarshal(body, &ds); err != nil {
			fmt.Fprintln(stderr, "pvans list: bad answer:", err)
			return 1
		}
		printRow(tw, "NAME", "ANSWERED BY", "TLS IDENTITY", "ALSO CLAIMED BY", "TLS IDENTITY")
		for _, d := range ds {
			printRow(tw, d.Name, d.HolderEndpoint+" "+d.HolderGUID, orDash(d.HolderIdentity),
				d.ClaimantEndpoint+" "+d.ClaimantGUID, orDash(d.ClaimantIdentity))
		}
	case *unresolved:
		var rep insight.UnresolvedReport
		if err := json.Unmarshal(body, &rep); err != nil {
			fmt.Fprintln(stderr, "pvans list: bad answer:", err)
			return 1
		}
		fmt.Fprintf(tw, "# names searched and not found since %s (%s window); counts within ±%d\n",
			rep.Since.Local().Format(time.TimeOnly), termSafe(rep.Window), rep.ErrorBound)
		printRow(tw, "NAME", "SEARCHES", "RATE", "CLIENTS", "TOP CLIENTS", "FIRST SEEN", "LAST SEEN")
		for _, u := range rep.Names {
			var top []string
			for _, c := range u.TopClients {
				top = append(top, fmt.Sprintf("%s(%d)", c.Addr, c.Searches))
			}
			cl := strconv.Itoa(u.Clients)
			if u.ClientsAtLeast {
				cl = ">=" + cl
			}
			printRow(tw, u.Name, strconv.FormatUint(u.Searches, 10), fmt.Sprintf("%.1f/s", u.PerSecond), cl, strings.Join(top, " "),
				u.FirstSeen.Local().Format(time.TimeOnly), u.LastSeen.Local().Format(time.TimeOnly))
		}
	case *clients:
		var rep insight.ClientsReport
		if err := json.Unmarshal(body, &rep); err != nil {
			fmt.Fprintln(stderr, "pvans list: bad answer:", err)
			return 1
		}
		fmt.Fprintf(tw, "# busiest clients since %s (%s window); name counts within ±%d\n",
			rep.Since.Local().Format(time.TimeOnly), termSafe(rep.Window), rep.ErrorBound)
		printRow(tw, "CLIENT", "NAMES", "NAMES/S", "SEARCHES/S", "NOT FOUND", "NOT FOUND/S", "OVER", "LAST SEEN")
		for _, c := range rep.Clients {
			printRow(tw, c.Addr, strconv.FormatUint(c.Names, 10), fmt.Sprintf("%.1f", c.NamesPerSecond), fmt.Sprintf("%.1f", c.SearchesPerSecond),
				fmt.Sprintf("%.0f%%", 100*c.NotFoundShare), fmt.Sprintf("%.1f", c.NotFoundPerSecond), c.Transport, c.LastSeen.Local().Format(time.TimeOnly))
		}
	case *names != "":
		var ns []httpapi.Name
		if err := json.Unmarshal(body, &ns); err != nil {
			fmt.Fprintln(stderr, "pvans list: bad answer:", err)
			return 1
		}
		printRow(tw, "NAME", "ENDPOINT", "TLS", "GUID", "LEARNED BY")
		for _, n := range ns {
			printRow(tw, n.Name, n.Endpoint, orDash(n.TLS), n.GUID, n.How)
		}
	default:
		var ss []httpapi.Server
		if err := json.Unmarshal(body, &ss); err != nil {
			fmt.Fprintln(stderr, "pvans list: bad answer:", err)
			return 1
		}
		printRow(tw, "ENDPOINT", "TLS", "GUID", "NAMES", "DISCOVERED", "PROBE", "LAST SEEN")
		for _, s := range ss {
			if s.Down {
				// Lost and not back: what went away, when and why.
				printRow(tw, s.Endpoint, "-", s.GUID, "0", "-", "DOWN since "+s.LostAt.Format(time.RFC3339)+" ("+s.LostReason+")", "-")
				continue
			}
			probe := s.ProbeState
			if s.ProbeError != "" {
				probe += " (" + s.ProbeError + ")"
			}
			printRow(tw, s.Endpoint, orDash(s.TLSEndpoint), s.GUID, strconv.Itoa(s.Names), s.Discovered, probe,
				s.LastSeen.Format(time.RFC3339))
		}
	}
	return 0
}

// countRows is the rows of a JSON array answer.
func countRows(body []byte) int {
	var rows []json.RawMessage
	_ = json.Unmarshal(body, &rows)
	return len(rows)
}

// orDash is s, or "-" for a column with nothing to show (no TLS endpoint).
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
