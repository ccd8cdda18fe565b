package httpapi

import (
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/registry"
)

// The status page's bounds: with 20,000 forged server rows it was 5.57 MB
// and took 1.1 s of CPU to render. It shows the troubled servers first,
// so the rows cut are healthy ones unless there are more troubled ones
// than fit; "N more" says how many, and /v1/servers pages through all.
const (
	MaxStatusServers    = 500
	MaxStatusDuplicates = 200
	statusEvents        = 50
)

// statusMinReload is the least time between two loads of the status page
// by its script: a change reloads a page at once unless it is younger.
const statusMinReload = 10 * time.Second

// The status page is server-rendered and refreshes itself, so an operator
// can leave it open on a wall screen; no front-end build. One small script
// long-polls GET /v1/changes and reloads the page as soon as the servers or
// duplicates change, but at most once per statusMinReload (servers that
// keep changing, even forged beacons, must not make every open page render
// as fast as a browser asks); a meta refresh reloads it every 30 s anyway
// (the "ago" times, the events), and alone without JavaScript.
// It leads with one coloured verdict for the whole site, then the counts,
// then the servers with the troubled ones first, so the answer to "is
// anything wrong?" is readable from across the room.
var statusTmpl = template.Must(template.New("status").Funcs(template.FuncMap{
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return time.Since(t).Round(time.Second).String() + " ago"
	},
	"short":   shortGUID,
	"evclass": eventClass,
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="30">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{if ne .Health "ok"}}(!) {{end}}pvans status</title>
<style>
:root{--ok:#1a7f37;--bad:#c62828;--warn:#b26a00;--info:#52606d;--line:#e1e5ea;--muted:#5f6b7a}
*{box-sizing:border-box}
body{margin:0;background:#f1f3f6;color:#1f2933;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
header{display:flex;align-items:baseline;gap:16px;padding:12px 24px;background:#1f2933;color:#fff}
header h1{margin:0;font-size:20px} header .sub{color:#c3ccd5}
header .rdy{color:#7ee2a0;font-weight:600;margin-left:-12px} header .nrdy{color:#ff9b9b;font-weight:600;margin-left:-12px}
main{padding:16px 24px}
.banner{display:flex;align-items:center;gap:12px;padding:12px 16px;border-radius:8px;color:#fff;font-size:17px;font-weight:600;margin-bottom:14px}
.banner .word{font-size:20px;text-transform:uppercase;letter-spacing:.05em}
.banner .why{font-weight:400}
.banner.ok{background:var(--ok)} .banner.bad{background:var(--bad)} .banner.warn{background:var(--warn)}
.cards{display:grid;grid-template-columns:repeat(5,1fr);gap:12px;margin-bottom:14px}
.card{background:#fff;border:1px solid var(--line);border-left:6px solid #aab4bf;border-radius:8px;padding:8px 14px}
.card b{display:block;font-size:28px;line-height:1.15}
.card span{color:var(--muted)}
.card.ok{border-left-color:var(--ok)} .card.bad{border-left-color:var(--bad)} .card.warn{border-left-color:var(--warn)}
.card.bad b{color:var(--bad)} .card.warn b{color:var(--warn)}
section{background:#fff;border:1px solid var(--line);border-radius:8px;margin-bottom:14px;overflow:hidden}
section h2{margin:0;padding:8px 14px;font-size:15px;border-bottom:1px solid var(--line)}
section h2 small{font-weight:400;color:var(--muted);margin-left:8px}
table{border-collapse:collapse;width:100%}
th,td{padding:5px 14px;text-align:left;border-bottom:1px solid #edf0f3;vertical-align:top}
th{font-size:12px;font-weight:600;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);background:#f8f9fb}
tbody tr:last-child td{border-bottom:0}
tr.bad td{background:#fdecea} tr.warn td{background:#fff5e0}
td.none{color:var(--muted);font-style:italic}
.pill{display:inline-block;min-width:7.5em;padding:1px 8px;border-radius:10px;color:#fff;font-size:12px;font-weight:600;text-align:center;white-space:nowrap}
.pill.ok{background:var(--ok)} .pill.bad{background:var(--bad)} .pill.warn{background:var(--warn)} .pill.info{background:var(--info)}
.err{color:var(--bad)} .muted{color:var(--muted)}
code{font-family:"DejaVu Sans Mono",ui-monospace,Menlo,Consolas,monospace;font-size:13px}
footer{padding:0 24px 16px;color:var(--muted)} a{color:#1f5fbf}
form.lookup{padding:10px 14px} form.lookup input{font:inherit;padding:4px 8px;border:1px solid #c3ccd5;border-radius:6px}
form.lookup button{font:inherit;padding:4px 12px;border:0;border-radius:6px;background:#1f2933;color:#fff}
.answer{padding:0 14px 10px}
</style></head><body data-revision="{{.Revision}}" data-min-reload="{{.MinReload.Milliseconds}}">
<header><h1>pvans</h1><span class="sub">PVAccess name server · version {{.Version}}{{if .Uptime}} · up {{.Uptime}}{{end}} · </span>{{if .Ready}}<span class="rdy">ready</span>{{else}}<span class="nrdy">not ready</span>{{end}}</header>
<main>
<div class="banner {{.Health}}" id="health"><span class="word">{{.Word}}</span><span class="why">{{.Verdict}}</span></div>
<div class="cards">
<div class="card {{if .Counts.Servers}}ok{{else}}warn{{end}}" id="servers"><b>{{.Counts.Servers}}</b><span>servers</span></div>
<div class="card" id="names"><b>{{.Counts.Names}}</b><span>names</span></div>
<div class="card {{if .Failing}}bad{{else}}ok{{end}}" id="failing"><b>{{.Failing}}</b><span>probes failing</span></div>
<div class="card {{if .Counts.DuplicateNames}}warn{{else}}ok{{end}}" id="dups"><b>{{.Counts.DuplicateNames}}</b><span>duplicate names</span></div>
<div class="card {{if .Counts.Unverified}}warn{{else}}ok{{end}}" id="unverified"><b>{{.Counts.Unverified}}</b><span>unverified</span></div>
</div>
<section><h2>Servers<small>troubled first</small></h2>
<table id="server-table"><thead><tr><th>state</th><th>endpoint</th><th>GUID</th><th>names</th><th>discovered</th><th>last seen</th><th>probe</th></tr></thead><tbody>
{{range .Servers}}<tr class="{{.Class}}"><td><span class="pill {{.Class}}">{{.State}}</span></td>
<td><code>{{.Endpoint}}</code>{{if .TLSEndpoint}} <code class="muted" title="Secure PVAccess endpoint: what clients offering TLS are told">tls {{.TLSEndpoint}}</code>{{end}}</td><td><code title="{{.GUID}}">{{short .GUID}}</code></td><td>{{.Names}}{{if .Shadowed}} <span class="muted">({{.Shadowed}} duplicate)</span>{{end}}</td><td>{{.Discovered}}</td><td>{{ago .LastSeen}}</td>
<td>{{.ProbeState}}{{if .ProbeError}} — <span class="err">{{.ProbeError}}</span>{{end}}{{if .LostReason}} — <span class="err">{{.LostReason}}</span>{{end}}</td></tr>
{{else}}<tr><td colspan="7" class="none">no servers known yet</td></tr>{{end}}
{{if .MoreServers}}<tr><td colspan="7" class="none" id="more-servers">{{.MoreServers}} more servers not shown (the ones above come first): <a href="/v1/servers">/v1/servers</a> lists them all, a page at a time</td></tr>{{end}}
</tbody></table></section>
<section><h2>Duplicate names<small>the first claim answers; the others are ignored until it goes</small></h2>
<table id="dup-table"><thead><tr><th>name</th><th>answered by</th><th>also claimed by</th><th>since</th></tr></thead><tbody>
{{range .Duplicates}}<tr class="warn"><td><code>{{.Name}}</code></td><td><code>{{.HolderEndpoint}}</code> <code class="muted">{{short .HolderGUID}}</code>{{if .HolderIdentity}} <span class="muted">TLS {{.HolderIdentity}}</span>{{end}}</td><td><code>{{.ClaimantEndpoint}}</code> <code class="muted">{{short .ClaimantGUID}}</code>{{if .ClaimantIdentity}} <span class="muted">TLS {{.ClaimantIdentity}}</span>{{end}}</td><td>{{ago .Since}}</td></tr>
{{else}}<tr><td colspan="4" class="none">none</td></tr>{{end}}
{{if .MoreDuplicates}}<tr><td colspan="4" class="none" id="more-duplicates">{{.MoreDuplicates}} more duplicate claims not shown: <a href="/v1/duplicates">/v1/duplicates</a> lists them all, a page at a time</td></tr>{{end}}
</tbody></table></section>
{{template "insight" .Insight}}
<section><h2>Recent events<small>newest first</small></h2>
<table id="event-table"><thead><tr><th>when</th><th>event</th><th>endpoint</th><th>GUID</th><th>detail</th></tr></thead><tbody>
{{range .Events}}<tr><td>{{ago .At}}</td><td><span class="pill {{evclass .Kind}}">{{.Kind}}</span></td><td><code>{{.Endpoint}}</code></td><td><code>{{short .GUID}}</code></td><td>{{.Detail}}</td></tr>
{{else}}<tr><td colspan="5" class="none">nothing yet</td></tr>{{end}}
</tbody></table></section>
</main>
<footer>Updates when servers or duplicates change (at most every {{.MinReload}}), and every 30 s · JSON: <a href="/v1/servers">/v1/servers</a> · <a href="/v1/names">/v1/names</a> · <a href="/v1/duplicates">/v1/duplicates</a> · <a href="/v1/events">/v1/events</a> · <a href="/v1/insight/unresolved">/v1/insight/unresolved</a> · <a href="/v1/insight/clients">/v1/insight/clients</a> · <a href="/metrics">/metrics</a></footer>
<script>
// Reload when the registry's revision moves (docs/api.md, GET /v1/changes),
// but not under a cursor in the lookup box; back off when busy or down.
(async () => {
  const born = performance.now();
  const rev = document.body.dataset.revision;
  const minReload = Number(document.body.dataset.minReload);
  const pause = ms => new Promise(ok => setTimeout(ok, ms));
  const reload = () => {
    const f = document.activeElement;
    if (f && f.tagName === "INPUT") f.addEventListener("blur", reload, {once: true});
    else location.reload();
  };
  for (;;) {
    try {
      const r = await fetch("/v1/changes?revision=" + rev, {cache: "no-store"});
      if (r.ok && String((await r.json()).revision) !== rev) {
        // Changes as fast as they come must not reload as fast as that.
        await pause(born + minReload - performance.now());
        return reload();
      }
      await pause(r.ok ? 1000 : 10000);
    } catch (e) {
      await pause(10000);
    }
  }
})();
</script>
</body></html>
`))

type statusData struct {
	Revision   uint64        // of the registry view shown
	MinReload  time.Duration // statusMinReload, for the script and the footer
	Version    string
	Uptime     string
	Ready      bool
	Health     string // ok, warn or bad: the banner's colour
	Word       string // the banner's headline
	Verdict    string // the banner's sentence
	Failing    int    // servers whose last probe failed
	Down       int    // servers lost and not back (httpapi.DefaultShowDownFor)
	Counts     countsView
	Servers    []statusServer
	Duplicates []Duplicate
	// MoreServers and MoreDuplicates are the rows not shown.
	MoreServers, MoreDuplicates int
	downNames                   string // the first few down servers' endpoints, for the banner
	Events                      []events.Event
	Insight                     statusInsight
}

// statusServer is a server row with its one-word state and colour class.
type statusServer struct {
	Server
	State, Class string
	Shadowed     int // names it claims that another server answers for
	rank         int
}

type countsView struct{ Servers, Names, DuplicateNames, Unverified int }

// serverState says what an operator should make of a server. A failed
// probe is "bad" because the daemon cannot list that server's names, so
// clients may be sent nowhere; an unverified one (loaded from a snapshot)
// is only a "warn" because it normally resolves within the window.
// Another pvans is a "replica", last.
func serverState(s Server) (state, class string, rank int) {
	switch {
	case s.Kind == "replica":
		return "replica", "ok", 3 // another pvans: nothing to list
	case s.ProbeState == registry.ProbeFailed.String():
		return "probe failed", "bad", 0
	case !s.Verified:
		return "unverified", "warn", 1
	}
	return "up", "ok", 2
}

// eventClass colours an event kind by how much it matters.
func eventClass(kind string) string {
	if strings.HasPrefix(kind, "anomaly") { // insight's beacon anomalies
		return "warn"
	}
	switch kind {
	case "lost", "unlistable":
		return "bad"
	case "duplicate", "restarted":
		return "warn"
	case "appeared", "listed":
		return "ok"
	}
	return "info"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// verdict is the banner: the worst thing first, the rest after it.
func (d *statusData) verdict(why string) {
	var issues []string
	if d.Down > 0 {
		issues = append(issues, plural(d.Down, "server down", "servers down")+" ("+d.downNames+")")
	}
	if d.Failing > 0 {
		issues = append(issues, plural(d.Failing, "server failing its probe", "servers failing their probe"))
	}
	if n := d.Counts.DuplicateNames; n > 0 {
		issues = append(issues, plural(n, "duplicate name", "duplicate names"))
	}
	if n := d.Counts.Unverified; n > 0 {
		issues = append(issues, plural(n, "unverified server", "unverified servers"))
	}
	switch {
	case !d.Ready:
		d.Health, d.Word, d.Verdict = "bad", "not ready", why
	case d.Failing > 0 || d.Down > 0:
		d.Health, d.Word = "bad", "degraded"
	case len(issues) > 0 || d.Counts.Servers == 0:
		d.Health, d.Word = "warn", "attention"
	default:
		d.Health, d.Word = "ok", "healthy"
	}
	if d.Ready {
		switch {
		case len(issues) > 0:
			d.Verdict = strings.Join(issues, " · ")
		case d.Counts.Servers == 0:
			d.Verdict = "no servers known yet"
		default:
			d.Verdict = "all " + plural(d.Counts.Servers, "server", "servers") + " up, " + plural(d.Counts.Names, "name", "names") + " answered"
		}
	}
}

func (a *api) status(w http.ResponseWriter, r *http.Request) {
	done, ok := a.render(w, r)
	if !ok {
		return
	}
	defer done()
	d := statusData{Version: a.o.Version, Ready: true}
	if !a.o.Started.IsZero() {
		d.Uptime = time.Since(a.o.Started).Round(time.Second).String()
	}
	why := ""
	if a.o.Ready != nil {
		d.Ready, why = a.o.Ready()
	}
	v := a.o.Registry.View() // servers, duplicates and counts of one commit
	d.Revision = v.Revision
	d.MinReload = statusMinReload
	c := v.Counts
	d.Counts = countsView{Servers: c.Servers, Names: c.Names, DuplicateNames: c.DuplicateNames, Unverified: c.Unverified}
	// Rank every row (the verdict counts them all), convert only those
	// shown: troubled first, then by endpoint.
	sortServers(v.Servers)
	type ranked struct {
		s    *registry.ServerInfo
		rank int
	}
	rows := make([]ranked, len(v.Servers))
	for i := range v.Servers {
		s := &v.Servers[i]
		_, _, rank := serverState(Server{Kind: kindOf(s.GUID), ProbeState: s.ProbeState.String(), Verified: s.Verified})
		if rank == 0 {
			d.Failing++
		}
		rows[i] = ranked{s, rank}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].rank < rows[j].rank })
	// Servers lost and not back come first: what went away is what an
	// operator looks for.
	down := a.down()
	d.Down = len(down)
	var eps []string
	for i, x := range down {
		if i < 3 {
			eps = append(eps, x.Endpoint.String())
		}
		if len(d.Servers) < MaxStatusServers {
			row := statusServer{Server: DownJSON(x), State: "down since " + x.Since.UTC().Format(time.TimeOnly), Class: "bad", rank: -1}
			d.Servers = append(d.Servers, row)
		}
	}
	if len(down) > len(eps) {
		eps = append(eps, "…")
	}
	d.downNames = strings.Join(eps, ", ")
	for _, x := range rows[:min(len(rows), max(0, MaxStatusServers-len(d.Servers)))] {
		row := statusServer{Server: ServerJSON(*x.s)}
		row.State, row.Class, row.rank = serverState(row.Server)
		row.Shadowed = max(0, x.s.Names-x.s.Held)
		d.Servers = append(d.Servers, row)
	}
	d.MoreServers = len(rows) + len(down) - len(d.Servers)
	d.verdict(why)
	for _, dup := range v.Duplicates[:min(len(v.Duplicates), MaxStatusDuplicates)] {
		d.Duplicates = append(d.Duplicates, DuplicateJSON(dup))
	}
	d.MoreDuplicates = len(v.Duplicates) - len(d.Duplicates)
	if a.o.Events != nil {
		d.Events = a.o.Events.Recent(statusEvents)
	}
	d.Insight = a.statusInsight(r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := statusTmpl.Execute(w, d); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
