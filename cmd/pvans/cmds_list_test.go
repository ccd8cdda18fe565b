package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/insight"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

// `pvans list` lists one thing at a time; two choices are refused rather
// than one silently winning.
func TestListRefusesTwoChoices(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"list", "--api", "http://127.0.0.1:1", "--servers", "--duplicates"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "at most one of") {
		t.Fatalf("exit %d, stderr %q; want 2 and a message naming the choices", code, errb.String())
	}
}

// `pvans list --unresolved` and `--clients` print the insight API's
// answers as tables, in its order, for the window asked.
func TestListUnresolvedAndClients(t *testing.T) {
	clk := clock.NewFake(time.Now().Add(-time.Minute))
	in := insight.New(insight.Options{Names: 10, Clients: 10, Clock: clk})
	search := func(client string, n int, names ...string) {
		s := pva.Search{Seq: 1}
		for i, nm := range names {
			s.Names = append(s.Names, pva.SearchName{CID: uint32(i), Name: []byte(nm)})
		}
		h, payload, _, _ := pva.SplitMessage(pva.AppendSearch(nil, pva.FlagBigEndian, &s))
		var d pva.Search
		if err := d.Decode(payload, h.BigEndian()); err != nil {
			t.Fatal(err)
		}
		missing := make([]int, len(names))
		for i := range missing {
			missing[i] = i
		}
		for range n {
			in.Searched(netip.MustParseAddr(client), false, payload, d.Names, missing, 0)
		}
	}
	search("10.1.1.1", 30, "typo:pv")
	search("10.1.1.2", 90, "retired:pv", "retired:pv2")
	clk.Advance(10 * time.Second)
	srv := httptest.NewServer(httpapi.Handler(httpapi.Options{Registry: emptyReg{}, Insight: in}))
	defer srv.Close()

	var out, errb bytes.Buffer
	if code := run([]string{"list", "--api", srv.URL, "--unresolved", "--window", "1m"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[1], "NAME") || !strings.HasPrefix(lines[2], "retired:pv") ||
		!strings.HasPrefix(lines[4], "typo:pv ") || !strings.Contains(lines[4], "10.1.1.1(30)") || !strings.Contains(lines[0], "1m window") {
		t.Errorf("unresolved table:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"list", "--api", srv.URL, "--clients"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines = strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "10.1.1.2") || !strings.Contains(lines[2], "100%") || !strings.HasPrefix(lines[3], "10.1.1.1") {
		t.Errorf("clients table:\n%s", out.String())
	}
	if code := run([]string{"list", "--api", srv.URL, "--clients", "--window", "5m"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "bad window") {
		t.Errorf("bad window: exit %d, stderr %q", code, errb.String())
	}
}

// emptyReg is a registry with nothing in it.
type emptyReg struct{}

func (emptyReg) View() registry.View                         { return registry.View{} }
func (emptyReg) Revision() (uint64, <-chan struct{})         { return 0, nil }
func (emptyReg) Server(pva.GUID) (registry.ServerInfo, bool) { return registry.ServerInfo{}, false }
func (emptyReg) NamesContext(context.Context, string, int) ([]registry.NameInfo, error) {
	return nil, nil
}
func (emptyReg) Name(string) (registry.NameInfo, bool) { return registry.NameInfo{}, false }

// `pvans list` shows each server's and name's TLS endpoint, "-" for none.
func TestListShowsTLSEndpoints(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/servers":
			_, _ = io.WriteString(w, `[{"guid":"g1","endpoint":"10.0.0.1:5075","tls_endpoint":"10.0.0.1:5076"},{"guid":"g2","endpoint":"10.0.0.2:5075"}]`)
		default:
			_, _ = io.WriteString(w, `[{"name":"sec:pv","guid":"g1","endpoint":"10.0.0.1:5075","tls_endpoint":"10.0.0.1:5076","how":"probe"}]`)
		}
	}))
	defer srv.Close()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--servers"}, []string{"10.0.0.1:5075  10.0.0.1:5076  g1", "10.0.0.2:5075  -              g2"}},
		{[]string{"--names", "*"}, []string{"sec:pv  10.0.0.1:5075  10.0.0.1:5076  g1"}},
	} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"list", "--api", srv.URL}, c.args...), &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, w, out.String())
			}
		}
	}
}

// hostileNames are names any host can send in a UDP search (and so see
// in `pvans list --unresolved`), or serve and so have listed: escape
// sequences that clear the screen and set the window title, a newline
// and a tab that forge rows and columns, an 8-bit CSI, a bidirectional
// override, a backslash.
var hostileNames = []string{
	"evil\x1b[2J\x1b[Hname", "\x1b]0;pwned\x07title", "two\nlines", "tab\tcell", "c1\u009b31mred",
	"rtl\u202egnp.exe", "back\\x1bslash", "bad\xffutf8",
}

// TestListEscapesNetworkStrings is issue 39 row 4: every `pvans list`
// table prints the network's strings with their control bytes escaped
// visibly, so nothing reaches the terminal that it would obey, and a name
// stays one cell of one row.
func TestListEscapesNetworkStrings(t *testing.T) {
	now := time.Now()
	var servers []httpapi.Server
	var names []httpapi.Name
	var dups []httpapi.Duplicate
	var unres insight.UnresolvedReport
	var clients insight.ClientsReport
	for _, n := range hostileNames {
		servers = append(servers, httpapi.Server{GUID: "g", Endpoint: "10.0.0.1:5075", ProbeState: "failed", ProbeError: n, Discovered: n})
		names = append(names, httpapi.Name{Name: n, GUID: "g", Endpoint: "10.0.0.1:5075", How: n})
		dups = append(dups, httpapi.Duplicate{Name: n, HolderIdentity: n, ClaimantIdentity: n})
		unres.Names = append(unres.Names, insight.Unresolved{Name: n, Searches: 1, TopClients: []insight.TopClient{{Addr: n, Searches: 1}}})
		clients.Clients = append(clients.Clients, insight.Client{Addr: n, Transport: n, LastSeen: now})
	}
	unres.Window, clients.Window = "1h\x1b[2J", "1h\x1b[2J"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v any
		switch r.URL.Path {
		case "/v1/servers":
			v = servers
		case "/v1/names":
			v = names
		case "/v1/duplicates":
			v = dups
		case "/v1/insight/unresolved":
			v = unres
		case "/v1/insight/clients":
			v = clients
		}
		_ = json.NewEncoder(w).Encode(v)
	}))
	defer srv.Close()
	for _, args := range [][]string{{"--servers"}, {"--names", "*"}, {"--duplicates"}, {"--unresolved"}, {"--clients"}, {"--unresolved", "--json"}} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"list", "--api", srv.URL}, args...), &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		text := out.String()
		for _, r := range text {
			if r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r <= 0x9f || r == '\u202e' {
				t.Fatalf("%v: the terminal is sent %U:\n%q", args, r, text)
			}
		}
		if args[len(args)-1] == "--json" {
			if !strings.Contains(text, `\u009b`) || !strings.Contains(text, `\u202e`) || !json.Valid(out.Bytes()) {
				t.Errorf("--json: C1 and format characters not escaped as JSON:\n%s", text)
			}
			continue
		}
		if !strings.Contains(text, `\x1b[2J`) || !strings.Contains(text, `\u{202e}`) && args[0] != "--servers" && args[0] != "--clients" {
			t.Errorf("%v: escapes not shown visibly:\n%s", args, text)
		}
		// One row per name: a name's newline does not make a row, its
		// tab no column.
		if lines := strings.Count(text, "\n"); lines > len(hostileNames)+2 {
			t.Errorf("%v: %d lines for %d rows:\n%s", args, lines, len(hostileNames), text)
		}
	}
}

// TestTermSafe: the one rule, byte by byte.
func TestTermSafe(t *testing.T) {
	for in, want := range map[string]string{
		"SR:C01-MG:PS1":   "SR:C01-MG:PS1",
		"Größe:温度":        "Größe:温度",
		"a\x1b[2Jb":       `a\x1b[2Jb`,
		"two\nlines\ttab": `two\x0alines\x09tab`,
		"del\x7f":         `del\x7f`,
		"bad\xff\xfe":     `bad\xff\xfe`,
		"c1\u009b":        `c1\u{009b}`,
		"rtl\u202eabc":    `rtl\u{202e}abc`,
		"zero\u200bwidth": `zero\u{200b}width`,
		"line\u2028sep":   `line\u{2028}sep`,
		`back\x1bslash`:   `back\\x1bslash`,
	} {
		if got := termSafe(in); got != want {
			t.Errorf("termSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

// `pvans list` asks for --limit rows and says how many the API left out.
func TestListSaysWhatWasCut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("limit") != "2" {
			t.Errorf("asked %s, want limit=2", r.URL)
		}
		if r.URL.Path == "/v1/names" {
			w.Header().Set(httpapi.MoreHeader, "true")
		} else {
			w.Header().Set(httpapi.TotalHeader, "20000")
		}
		_, _ = io.WriteString(w, `[{"guid":"g1","endpoint":"10.0.0.1:5075"},{"guid":"g2","endpoint":"10.0.0.2:5075"}]`)
	}))
	defer srv.Close()
	for _, c := range []struct{ args, want string }{
		{"--servers", "19998 more not shown"}, {"--duplicates", "19998 more not shown"}, {"--names=*", "more names match than shown"},
	} {
		var out, errb bytes.Buffer
		if code := run([]string{"list", "--api", srv.URL, c.args, "--limit", "2"}, &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		if !strings.Contains(errb.String(), c.want) {
			t.Errorf("%s: stderr %q; want %q", c.args, errb.String(), c.want)
		}
	}
}
