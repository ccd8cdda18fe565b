package main

import (
	"bytes"
	"context"
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
