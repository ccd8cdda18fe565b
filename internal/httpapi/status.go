package httpapi

import (
	"html/template"
	"net/http"
	"time"

	"github.com/pvans-project/pvans/internal/events"
)

// The status page is server-rendered and refreshes itself, so an operator
// can leave it open on a wall screen; no JavaScript, no front-end build.
var statusTmpl = template.Must(template.New("status").Funcs(template.FuncMap{
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return time.Since(t).Round(time.Second).String() + " ago"
	},
	"short": shortGUID,
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="10">
<title>pvans status</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin-bottom:.2em} h2{font-size:1.1em;margin-top:1.5em}
.sub{color:#666} table{border-collapse:collapse;width:100%;font-size:.9em}
th,td{border-bottom:1px solid #ddd;padding:.3em .6em;text-align:left} th{background:#f4f4f4}
.ok{color:#1a7f37;font-weight:600} .bad{color:#c62828;font-weight:600} .warn{color:#b26a00;font-weight:600}
.cards{display:flex;gap:1em;flex-wrap:wrap} .card{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;min-width:9em}
.card b{display:block;font-size:1.5em} code{font-size:.95em}
</style></head><body>
<h1>pvans — PVAccess name server</h1>
<div class="sub">version {{.Version}} · up {{.Uptime}} · {{if .Ready}}<span class="ok">ready</span>{{else}}<span class="bad">not ready: {{.Why}}</span>{{end}}</div>
<div class="cards">
<div class="card" id="servers"><b>{{.Counts.Servers}}</b>servers</div>
<div class="card" id="names"><b>{{.Counts.Names}}</b>names</div>
<div class="card" id="dups"><b class="{{if .Counts.DuplicateNames}}warn{{end}}">{{.Counts.DuplicateNames}}</b>duplicate names</div>
<div class="card"><b>{{.Counts.Unverified}}</b>unverified</div>
</div>
<h2>Servers</h2>
<table id="server-table"><tr><th>state</th><th>endpoint</th><th>GUID</th><th>names</th><th>discovered</th><th>last seen</th><th>probe</th></tr>
{{range .Servers}}<tr><td>{{if not .Verified}}<span class="warn">unverified</span>{{else if eq .ProbeState "failed"}}<span class="bad">probe failed</span>{{else}}<span class="ok">up</span>{{end}}</td>
<td><code>{{.Endpoint}}</code></td><td><code title="{{.GUID}}">{{short .GUID}}</code></td><td>{{.Names}}</td><td>{{.Discovered}}</td><td>{{ago .LastSeen}}</td>
<td>{{.ProbeState}}{{if .ProbeError}} — {{.ProbeError}}{{end}}</td></tr>
{{else}}<tr><td colspan="7">no servers known yet</td></tr>{{end}}
</table>
<h2>Duplicate names</h2>
<table id="dup-table"><tr><th>name</th><th>answered by</th><th>also claimed by</th></tr>
{{range .Duplicates}}<tr><td><code>{{.Name}}</code></td><td><code>{{.HolderEndpoint}}</code> ({{short .HolderGUID}})</td><td><code>{{.ClaimantEndpoint}}</code> ({{short .ClaimantGUID}})</td></tr>
{{else}}<tr><td colspan="3">none</td></tr>{{end}}
</table>
<h2>Recent events</h2>
<table id="event-table"><tr><th>when</th><th>event</th><th>endpoint</th><th>GUID</th><th>detail</th></tr>
{{range .Events}}<tr><td>{{ago .At}}</td><td>{{.Kind}}</td><td><code>{{.Endpoint}}</code></td><td><code>{{short .GUID}}</code></td><td>{{.Detail}}</td></tr>
{{else}}<tr><td colspan="5">nothing yet</td></tr>{{end}}
</table>
<p class="sub">JSON: <a href="/v1/servers">/v1/servers</a> · <a href="/v1/names">/v1/names</a> · <a href="/v1/duplicates">/v1/duplicates</a> · <a href="/v1/events">/v1/events</a> · <a href="/metrics">/metrics</a></p>
</body></html>
`))

type statusData struct {
	Version    string
	Uptime     string
	Ready      bool
	Why        string
	Counts     countsView
	Servers    []Server
	Duplicates []Duplicate
	Events     []events.Event
}

type countsView struct{ Servers, Names, DuplicateNames, Unverified int }

func (a *api) status(w http.ResponseWriter, r *http.Request) {
	d := statusData{Version: a.o.Version, Ready: true}
	if !a.o.Started.IsZero() {
		d.Uptime = time.Since(a.o.Started).Round(time.Second).String()
	}
	if a.o.Ready != nil {
		d.Ready, d.Why = a.o.Ready()
	}
	c := a.o.Registry.Counts()
	d.Counts = countsView{Servers: c.Servers, Names: c.Names, DuplicateNames: c.DuplicateNames, Unverified: c.Unverified}
	for _, s := range sortedServers(a.o.Registry) {
		d.Servers = append(d.Servers, ServerJSON(s))
	}
	for i, dup := range a.o.Registry.Duplicates() {
		if i == 200 {
			break
		}
		d.Duplicates = append(d.Duplicates, DuplicateJSON(dup))
	}
	if a.o.Events != nil {
		d.Events = a.o.Events.Recent(50)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := statusTmpl.Execute(w, d); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
