package httpapi

import (
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/pvans-project/pvans/internal/insight"
)

// Insight is what the API reads from the search-traffic summaries
// (*insight.Insight is one).
type Insight interface {
	Unresolved(window string, limit int) (insight.UnresolvedReport, bool)
	Clients(window string, limit int) (insight.ClientsReport, bool)
	Name(name string) (insight.Unresolved, insight.Report, bool)
}

// MaxInsightLimit caps limit on /v1/insight/*; the summaries hold at most
// twice their slots per window anyway.
const MaxInsightLimit = 1000

// maxLookupName bounds the status page's lookup box (pvAccessCPP's name
// limit is 500 bytes).
const maxLookupName = 500

func (a *api) insightParams(w http.ResponseWriter, r *http.Request) (window string, limit int, ok bool) {
	if a.o.Insight == nil {
		writeErr(w, http.StatusServiceUnavailable, "search insight is not available")
		return "", 0, false
	}
	window, limit = "1h", 100
	if s := r.URL.Query().Get("window"); s != "" {
		window = s
	}
	if window != "1m" && window != "1h" {
		writeErr(w, http.StatusBadRequest, "bad window "+strconv.Quote(window)+": want 1m or 1h")
		return "", 0, false
	}
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			writeErr(w, http.StatusBadRequest, "bad limit "+strconv.Quote(s)+": want a positive integer")
			return "", 0, false
		}
		limit = n
	}
	return window, min(limit, MaxInsightLimit), true
}

// insightReport serves one /v1/insight/* report (Insight.Unresolved or
// Insight.Clients) for the window and limit the query asks.
func insightReport[T any](a *api, report func(in Insight, window string, limit int) (T, bool)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		window, limit, ok := a.insightParams(w, r)
		if !ok {
			return
		}
		rep, _ := report(a.o.Insight, window, limit)
		writeJSON(w, http.StatusOK, rep)
	}
}

// statusInsight is the status page's search sections: the lookup box's
// answer and the last hour's top unresolved names and busiest clients.
type statusInsight struct {
	Query      string // the looked-up name; "" when none
	QueryError string
	Found      *Name // who serves it
	Searched   *insight.Unresolved
	Since      time.Time // the window's start (lookup answer)
	Unresolved []insight.Unresolved
	Clients    []insight.Client
	Available  bool
}

// statusRows is how many rows each insight table shows on the page.
const statusRows = 10

func (a *api) statusInsight(r *http.Request) statusInsight {
	var si statusInsight
	if q := r.URL.Query().Get("name"); q != "" {
		si.Query = q
		if len(q) > maxLookupName {
			si.Query = q[:maxLookupName] + "…"
			si.QueryError = "name longer than " + strconv.Itoa(maxLookupName) + " bytes: no server can hold it"
		} else if info, ok := a.o.Registry.Name(q); ok {
			n := NameJSON(info)
			si.Found = &n
		} else if a.o.Insight != nil {
			if u, rep, ok := a.o.Insight.Name(q); ok {
				si.Searched = &u
			} else {
				si.Since = rep.Since
			}
		}
	}
	if a.o.Insight == nil {
		return si
	}
	si.Available = true
	if rep, ok := a.o.Insight.Unresolved("1h", statusRows); ok {
		si.Unresolved = rep.Names
		if si.Since.IsZero() {
			si.Since = rep.Since
		}
	}
	if rep, ok := a.o.Insight.Clients("1h", statusRows); ok {
		si.Clients = rep.Clients
	}
	return si
}

// The status page's search sections, kept in their own template.
var _ = template.Must(statusTmpl.New("insight").Funcs(template.FuncMap{
	"pct":  func(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + " %" },
	"rate": func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) + "/s" },
}).Parse(`
<section id="lookup"><h2>Look up a name<small>who serves it, or who is searching for it</small></h2>
<form method="get" action="/" class="lookup"><input type="text" name="name" value="{{.Query}}" placeholder="PV name, e.g. SR:C01-MG:PS1" size="48" maxlength="500"> <button type="submit">look up</button></form>
{{if .Query}}<div class="answer" id="lookup-answer">
{{if .QueryError}}<span class="pill bad">error</span> {{.QueryError}}
{{else if .Found}}<span class="pill ok">served</span> <code>{{.Found.Name}}</code> is served by <code>{{.Found.Endpoint}}</code> <code class="muted" title="{{.Found.GUID}}">{{short .Found.GUID}}</code>, learned by {{.Found.How}}{{if not .Found.At.IsZero}} since {{ago .Found.At}}{{end}}{{if .Found.Duplicates}} · <span class="err">also claimed by {{.Found.Duplicates}} other server(s)</span>{{else}} · no duplicates{{end}}
{{else if .Searched}}<span class="pill bad">not found</span> <code>{{.Query}}</code>: searched {{.Searched.Searches}} times by {{if .Searched.ClientsAtLeast}}at least {{end}}{{.Searched.Clients}} client(s) in the last hour (first {{ago .Searched.FirstSeen}}, last {{ago .Searched.LastSeen}}){{with .Searched.TopClients}}; most by {{range $i, $c := .}}{{if $i}}, {{end}}<code>{{$c.Addr}}</code> ({{$c.Searches}}){{end}}{{end}}
{{else}}<span class="pill info">unknown</span> <code>{{.Query}}</code>: no server holds it, and nobody searched for it in the last hour
{{end}}</div>{{end}}
</section>
{{if .Available}}
<section><h2>Searched but not found<small>last hour, most searched first · counts within the documented error bound</small></h2>
<table id="unresolved-table"><thead><tr><th>name</th><th>searches</th><th>rate</th><th>clients</th><th>top clients</th><th>first seen</th><th>last seen</th></tr></thead><tbody>
{{range .Unresolved}}<tr class="warn"><td><code>{{.Name}}</code></td><td>{{.Searches}}</td><td>{{rate .PerSecond}}</td><td>{{if .ClientsAtLeast}}≥ {{end}}{{.Clients}}</td><td>{{range $i, $c := .TopClients}}{{if $i}}, {{end}}<code>{{$c.Addr}}</code> ({{$c.Searches}}){{end}}</td><td>{{ago .FirstSeen}}</td><td>{{ago .LastSeen}}</td></tr>
{{else}}<tr><td colspan="7" class="none">every name searched for in the last hour was found</td></tr>{{end}}
</tbody></table></section>
<section><h2>Busiest clients<small>last hour, most names searched first</small></h2>
<table id="client-table"><thead><tr><th>client</th><th>names</th><th>names/s</th><th>searches/s</th><th>not found</th><th>over</th><th>last seen</th></tr></thead><tbody>
{{range .Clients}}<tr{{if ge .NotFoundShare 0.5}} class="warn"{{end}}><td><code>{{.Addr}}</code></td><td>{{.Names}}</td><td>{{rate .NamesPerSecond}}</td><td>{{rate .SearchesPerSecond}}</td><td>{{pct .NotFoundShare}}</td><td>{{.Transport}}</td><td>{{ago .LastSeen}}</td></tr>
{{else}}<tr><td colspan="7" class="none">no searches yet</td></tr>{{end}}
</tbody></table></section>
{{end}}`))
