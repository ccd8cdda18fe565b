// Package httpapi is the operator's window on the daemon: /healthz (the
// process is alive), /readyz (sockets bound and the registry primed by a
// discovery round or a snapshot), the JSON API under /v1 (servers, names,
// duplicates, a long poll for their changes, discovery on demand), the
// read-only status page at / and Prometheus metrics at /metrics. It only
// reads what other parts know; it owns no state but the handlers.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/limitlog"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

// Registry is what the API reads from the registry.
type Registry interface {
	// View is servers, duplicates and counts from one read transaction.
	View() registry.View
	// Revision is View's Revision and Changed alone, for the long poll.
	Revision() (uint64, <-chan struct{})
	Server(g pva.GUID) (registry.ServerInfo, bool)
	// NamesContext lists held names; the listing ends when ctx does
	// (ListTimeout).
	NamesContext(ctx context.Context, glob string, limit int) ([]registry.NameInfo, error)
	Name(name string) (registry.NameInfo, bool)
}

// Options wires the API to the daemon.
type Options struct {
	Registry Registry
	Events   *events.Log
	// Down is the servers lost and not back, shown as down for
	// Limits.ShowDownFor; nil shows none.
	Down *events.Down
	// Insight answers /v1/insight/* and the status page's search
	// sections; nil disables them.
	Insight Insight
	Metrics http.Handler // /metrics; nil disables
	// Ready reports readiness and, when not ready, why.
	Ready func() (bool, string)
	// Discover sends a discovery round now (POST /v1/discover).
	Discover func() error
	// Version is shown on the status page.
	Version string
	// Started is the daemon's start time.
	Started time.Time
	// Told is what a client at client is told for name by a search
	// offering "tcp", or "tls" and "tcp" when tls, decided as in every
	// answer (the daemon's is answer.Told); nil: not shown.
	Told func(name string, client netip.Addr, tls bool) Claimed
	// Limits bound the listener and the costly endpoints (New).
	Limits Limits
	// HostNames are the names this machine is known by besides localhost
	// (its host name, http.listen's host when a name), lowercase, without
	// a trailing dot: requests may name them as Host (host.go).
	HostNames []string
	// WebConfigFile is an exporter-toolkit web configuration file (TLS,
	// client certificates, basic auth) for New; "" = plain HTTP.
	WebConfigFile string `setting:"http.web_config_file"`
	Logger        *zap.Logger
	// Clock times the discovery rate limit and the long poll's wait; nil =
	// clock.Real.
	Clock clock.Clock

	cnt *counters // set by New; Handler alone makes its own
	// lim holds Limits as Apply changes them (set by New;
	// Handler alone makes its own).
	lim *atomic.Pointer[Limits]
	// closing is closed when the Service shuts down: waiting long polls
	// answer at once instead of holding the shutdown (nil: never).
	closing <-chan struct{}
}

// The lists' bounds. A list is never longer than MaxListLimit rows:
// 20,000 forged server rows (beacons from 4,000 addresses, ~10 s) made one
// GET /v1/servers 9.3 MB; 10,000 rows are ~4 MB.
const (
	// DefaultListLimit is a list's rows when the request names no limit.
	DefaultListLimit = 1000
	// MaxListLimit caps limit on /v1/servers, /v1/duplicates and
	// /v1/names; /v1/servers and /v1/duplicates page with offset,
	// /v1/names with a narrower match.
	MaxListLimit = 10000
	// MaxNamesLimit is MaxListLimit for /v1/names.
	MaxNamesLimit = MaxListLimit
	// MaxRenders is the views of the whole registry built at once: the
	// status page, /v1/servers, /v1/duplicates. Each copies every server
	// row (16 parallel status pages over 20,000 rows took 690 MiB);
	// more are answered 503 with Retry-After.
	MaxRenders = 4
)

// TotalHeader carries the rows of a list in all, beyond the page answered
// (GET /v1/servers, /v1/duplicates).
const TotalHeader = "Pvans-Total"

// MoreHeader says "true" when more names match than a /v1/names answer
// holds (its limit); counting them all would cost another scan.
const MoreHeader = "Pvans-More"

// Handler returns the mux serving every endpoint.
func Handler(o Options) http.Handler {
	o.Limits = o.Limits.withDefaults()
	if o.lim == nil {
		o.lim = new(atomic.Pointer[Limits])
		l := o.Limits.withDefaults()
		o.lim.Store(&l)
	}
	if o.cnt == nil {
		o.cnt = new(counters)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	o.HostNames = NormalizeHostNames(o.HostNames)
	a := &api{o: o, listings: make(chan struct{}, MaxListings), renders: make(chan struct{}, MaxRenders), ll: limitlog.New(o.Logger, 0, nil)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.HandleFunc("GET /v1/servers", a.servers)
	mux.HandleFunc("GET /v1/servers/{guid}", a.server)
	mux.HandleFunc("GET /v1/names", a.names)
	mux.HandleFunc("GET /v1/names/{name}", a.name)
	mux.HandleFunc("GET /v1/duplicates", a.duplicates)
	mux.HandleFunc("GET /v1/changes", a.changes)
	mux.HandleFunc("GET /v1/events", a.events)
	mux.HandleFunc("GET /v1/insight/unresolved", insightReport(a, Insight.Unresolved))
	mux.HandleFunc("GET /v1/insight/clients", insightReport(a, Insight.Clients))
	mux.HandleFunc("POST /v1/discover", a.discover)
	mux.HandleFunc("GET /{$}", a.status)
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics)
	}
	h := jsonMisses(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.checkHost(w, r) {
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		h.ServeHTTP(w, r)
	})
}

type api struct {
	o        Options
	ll       *limitlog.Log
	listings chan struct{} // semaphore: MaxListings
	renders  chan struct{} // semaphore: MaxRenders
	waiting  atomic.Int64  // long polls waiting now

	discoverMu   sync.Mutex
	lastDiscover time.Time
}

// Server is the JSON form of a server.
type Server struct {
	GUID     string `json:"guid"`
	Endpoint string `json:"endpoint"`
	// Kind is "server", or "replica" for another pvans (its GUID says
	// so): listed, never probed.
	Kind        string    `json:"kind"`
	Protocol    string    `json:"protocol"`
	TLSEndpoint string    `json:"tls_endpoint,omitempty"` // Secure PVAccess endpoint, if the server has one
	Identity    string    `json:"tls_identity,omitempty"` // certificate proven over TLS at the last listing
	Version     uint8     `json:"version"`
	Discovered  string    `json:"discovered"`
	FirstSeen   time.Time `json:"first_seen"`
	LastSeen    time.Time `json:"last_seen"`
	ChangeCount uint16    `json:"change_count"`
	ProbeState  string    `json:"probe_state"`
	ProbeError  string    `json:"probe_error,omitempty"`
	ProbedAt    time.Time `json:"probed_at,omitzero"`
	Names       int       `json:"names"`
	Held        int       `json:"held"`
	ListedHow   string    `json:"listed_how,omitempty"`
	Verified    bool      `json:"verified"`
	// Down marks a server lost and not back at its endpoint (shown for
	// httpapi.DefaultShowDownFor): it holds no names; LostAt and LostReason say
	// when and why.
	Down       bool      `json:"down,omitempty"`
	LostAt     time.Time `json:"lost_at,omitzero"`
	LostReason string    `json:"lost_reason,omitempty"`
}

// DownJSON is the row of a server shown as down.
func DownJSON(d events.DownServer) Server {
	return Server{GUID: d.GUID, Endpoint: ep(d.Endpoint), Kind: "server", ProbeState: "down",
		Protocol: d.Protocol, Discovered: d.Discovered, FirstSeen: d.FirstSeen, LastSeen: d.LastSeen,
		Down: true, LostAt: d.Since, LostReason: d.Reason}
}

// down is the servers to show as down now.
func (a *api) down() []events.DownServer {
	if a.o.Down == nil {
		return nil
	}
	return a.o.Down.List(a.o.Clock.Now(), a.o.lim.Load().ShowDownFor)
}

// Name is the JSON form of a held name.
type Name struct {
	Name       string    `json:"name"`
	GUID       string    `json:"guid"`
	Endpoint   string    `json:"endpoint"`
	TLS        string    `json:"tls_endpoint,omitempty"`
	How        string    `json:"how"`
	At         time.Time `json:"at,omitzero"`
	Duplicates int       `json:"duplicates"`
	// Told is what a given client is told (GET /v1/names/{name}?client=ADDR).
	Told *Told `json:"told,omitempty"`
}

// Claimed is one answer's claim as Options.Told decides it.
type Claimed struct {
	Addr     pva.Address
	Port     uint16
	Protocol string // "tcp" or "tls"
	// Withheld is why the answer names nothing for the name (the
	// claims-withheld metrics' reason: "protocol", "zero_endpoint";
	// "unheld": nobody holds it any more; "name_policy": the name access
	// list or name length refuses it); "" when it names Addr, Port
	// and Protocol.
	Withheld string
}

// Told is what one client is told for a name: the claim's refusals, the
// address map (map.rules) and the loopback rule applied, as in every
// answer.
type Told struct {
	Client string `json:"client"`
	// Withheld: the answer names nothing for this name, and why
	// ("protocol": the server takes only a protocol the search did not
	// offer; "zero_endpoint": the registry has a zero address or port;
	// "unheld": nobody holds it any more; "name_policy":
	// access.name_allow/name_deny or the name length refuses every search
	// for it); the fields below are then
	// empty.
	Withheld string `json:"withheld,omitempty"`
	// Endpoint is the address:port in the answer; empty when Any.
	Endpoint string `json:"endpoint,omitempty"`
	// Any: the answer carries the "any" address, which the client reads
	// as the address it reached pvans on, with Port.
	Any      bool   `json:"any"`
	Port     uint16 `json:"port"`
	Protocol string `json:"protocol,omitempty"`
	// TLS is what the same client is told when its search offers "tls"
	// (and "tcp"), when that is something else (the server's TLS
	// endpoint; a server serving only TLS); nil otherwise.
	TLS *Told `json:"tls,omitempty"`
}

// Duplicate is the JSON form of a duplicate claim.
type Duplicate struct {
	Name             string    `json:"name"`
	HolderGUID       string    `json:"holder_guid"`
	HolderEndpoint   string    `json:"holder_endpoint"`
	ClaimantGUID     string    `json:"claimant_guid"`
	ClaimantEndpoint string    `json:"claimant_endpoint"`
	HolderIdentity   string    `json:"holder_tls_identity,omitempty"`
	ClaimantIdentity string    `json:"claimant_tls_identity,omitempty"`
	Since            time.Time `json:"since,omitzero"`
}

func ep(a netip.AddrPort) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// ServerJSON converts a registry server.
func ServerJSON(s registry.ServerInfo) Server {
	out := Server{GUID: s.GUID.String(), Endpoint: ep(s.Addr), Protocol: s.Protocol, TLSEndpoint: ep(s.TLS), Identity: s.Identity, Version: s.Version,
		Discovered: s.Discovered.String(), FirstSeen: s.FirstSeen, LastSeen: s.LastSeen,
		ChangeCount: s.ChangeCount, ProbeState: s.ProbeState.String(), ProbeError: s.ProbeError,
		ProbedAt: s.ProbedAt, Names: s.Names, Held: s.Held, Verified: s.Verified}
	if !s.ListedAt.IsZero() {
		out.ListedHow = s.ListedHow.String()
	}
	out.Kind = kindOf(s.GUID)
	return out
}

// kindOf is a server's Kind: "replica" for another pvans (its GUID says
// so), else "server".
func kindOf(g pva.GUID) string {
	if g.IsPvans() {
		return "replica"
	}
	return "server"
}

// NameJSON converts a registry name.
func NameJSON(n registry.NameInfo) Name {
	return Name{Name: n.Name, GUID: n.GUID.String(), Endpoint: ep(n.Addr), TLS: ep(n.TLS), How: n.How.String(), At: n.At, Duplicates: n.Claimant}
}

// DuplicateJSON converts a registry duplicate.
func DuplicateJSON(d registry.Duplicate) Duplicate {
	return Duplicate{Name: d.Name, HolderGUID: d.Holder.String(), HolderEndpoint: ep(d.HolderAddr),
		ClaimantGUID: d.Claimant.String(), ClaimantEndpoint: ep(d.ClaimantAddr), Since: d.Since,
		HolderIdentity: d.HolderIdentity, ClaimantIdentity: d.ClaimantIdentity}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Error is the JSON body of every non-2xx answer.
type Error struct {
	Error string `json:"error"`
}

func writeErr(w http.ResponseWriter, code int, msg string) { writeJSON(w, code, Error{Error: msg}) }

func (a *api) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("ok\n"))
}

func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	ok, why := true, ""
	if a.o.Ready != nil {
		ok, why = a.o.Ready()
	}
	w.Header().Set("Content-Type", "text/plain")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready: " + why + "\n"))
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// sortServers orders servers by endpoint, then GUID.
func sortServers(ss []registry.ServerInfo) {
	sort.Slice(ss, func(i, j int) bool {
		if c := ss[i].Addr.Compare(ss[j].Addr); c != 0 {
			return c < 0
		}
		return bytes.Compare(ss[i].GUID[:], ss[j].GUID[:]) < 0
	})
}

// RevisionHeader carries the registry revision an answer was read at
// (GET /v1/servers, /v1/duplicates, /v1/changes).
const RevisionHeader = "Pvans-Revision"

func setRevision(w http.ResponseWriter, rev uint64) {
	w.Header().Set(RevisionHeader, strconv.FormatUint(rev, 10))
}

// pageParams reads a list's offset and limit (DefaultListLimit, capped
// at MaxListLimit); on a bad one it answers 400 and returns ok false.
func pageParams(w http.ResponseWriter, r *http.Request) (offset, limit int, ok bool) {
	q := r.URL.Query()
	limit = DefaultListLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			writeErr(w, http.StatusBadRequest, "bad limit "+strconv.Quote(s)+": want a positive integer")
			return 0, 0, false
		}
		limit = n
	}
	if s := q.Get("offset"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			writeErr(w, http.StatusBadRequest, "bad offset "+strconv.Quote(s)+": want 0 or a positive integer")
			return 0, 0, false
		}
		offset = n
	}
	return offset, min(limit, MaxListLimit), true
}

// page is rows[offset:offset+limit], with the total in TotalHeader.
func page[T any](w http.ResponseWriter, rows []T, offset, limit int) []T {
	w.Header().Set(TotalHeader, strconv.Itoa(len(rows)))
	offset = min(offset, len(rows))
	return rows[offset:min(offset+limit, len(rows))]
}

// render takes one of the MaxRenders slots for a view of the whole
// registry; when all are taken it answers 503 and returns false. done
// gives the slot back.
func (a *api) render(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	select {
	case a.renders <- struct{}{}:
		return func() { <-a.renders }, true
	default:
	}
	a.o.cnt.rendersBusy.Add(1)
	a.ll.Hit("http_renders", "registry views already being built; answered 503", zap.Int("max_renders", MaxRenders), zap.String("path", r.URL.Path))
	w.Header().Set("Retry-After", "1")
	if r.URL.Path == "/" {
		// A wall screen's page tries again by itself.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `<!doctype html><meta http-equiv="refresh" content="2"><title>pvans status</title><p>pvans is busy rendering other pages; this one tries again in 2 s.</p>`)
		return nil, false
	}
	writeErr(w, http.StatusServiceUnavailable, fmt.Sprintf("%d registry views already being built; retry", MaxRenders))
	return nil, false
}

func (a *api) servers(w http.ResponseWriter, r *http.Request) {
	offset, limit, ok := pageParams(w, r)
	if !ok {
		return
	}
	done, ok := a.render(w, r)
	if !ok {
		return
	}
	defer done()
	v := a.o.Registry.View()
	sortServers(v.Servers)
	// The servers that are down come first, as on the status page; they
	// are bounded (events.MaxDown) and page with the rest.
	down := a.down()
	all := make([]Server, 0, len(down)+len(v.Servers))
	for _, d := range down {
		all = append(all, DownJSON(d))
	}
	out := slices.Clone(page(w, all, offset, limit))
	for _, s := range v.Servers[min(len(v.Servers), max(0, offset-len(down))):] {
		if len(out) >= limit {
			break
		}
		out = append(out, ServerJSON(s))
	}
	w.Header().Set(TotalHeader, strconv.Itoa(len(down)+len(v.Servers)))
	setRevision(w, v.Revision)
	writeJSON(w, http.StatusOK, out)
}

func (a *api) server(w http.ResponseWriter, r *http.Request) {
	g, err := pva.ParseGUID(r.PathValue("guid"))
	if err != nil {
		writeErr(w, http.StatusBadRequest, "bad GUID "+strconv.Quote(r.PathValue("guid"))+": want 24 hex digits")
		return
	}
	s, ok := a.o.Registry.Server(g)
	if !ok {
		writeErr(w, http.StatusNotFound, "no server with GUID "+g.String())
		return
	}
	writeJSON(w, http.StatusOK, ServerJSON(s))
}

func (a *api) names(w http.ResponseWriter, r *http.Request) {
	match := r.URL.Query().Get("match")
	if match == "" {
		match = "*"
	}
	if len(match) > MaxMatchBytes || strings.Count(match, "*")+strings.Count(match, "?") > MaxMatchWildcards {
		a.o.cnt.matchRefused.Add(1)
		a.ll.Hit("http_match_pattern", "/v1/names match pattern over the bound refused", zap.Int("bytes", len(match)))
		writeErr(w, http.StatusBadRequest, fmt.Sprintf("match pattern too long: at most %d bytes and %d wildcards", MaxMatchBytes, MaxMatchWildcards))
		return
	}
	limit := 1000
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			writeErr(w, http.StatusBadRequest, "bad limit "+strconv.Quote(s)+": want a positive integer")
			return
		}
		limit = n
	}
	limit = min(limit, MaxNamesLimit)
	select {
	case a.listings <- struct{}{}:
		defer func() { <-a.listings }()
	default:
		a.o.cnt.listingsBusy.Add(1)
		a.ll.Hit("http_listings", "listings already running; /v1/names answered 503", zap.Int("max_listings", MaxListings))
		w.Header().Set("Retry-After", "1")
		writeErr(w, http.StatusServiceUnavailable, fmt.Sprintf("%d listings already running; retry", MaxListings))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), ListTimeout)
	defer cancel()
	ns, err := a.o.Registry.NamesContext(ctx, match, limit+1) // one more: are there more?
	if err != nil {
		a.o.cnt.listingsTimedOut.Add(1)
		a.ll.Hit("http_listing_timeout", "listing ran out of time; answered 503", zap.Duration("list_timeout", ListTimeout))
		writeErr(w, http.StatusServiceUnavailable, "listing did not finish within "+ListTimeout.String()+"; narrow the match")
		return
	}
	if len(ns) > limit {
		ns = ns[:limit]
		w.Header().Set(MoreHeader, "true")
	}
	out := make([]Name, 0, len(ns))
	for _, n := range ns {
		out = append(out, NameJSON(n))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) name(w http.ResponseWriter, r *http.Request) {
	n := r.PathValue("name")
	var client netip.Addr
	if c := r.URL.Query().Get("client"); c != "" {
		var err error
		if client, err = netip.ParseAddr(c); err != nil || client.Zone() != "" {
			writeErr(w, http.StatusBadRequest, "client: not an IP address: "+strconv.Quote(c))
			return
		}
	}
	info, ok := a.o.Registry.Name(n)
	if !ok {
		writeErr(w, http.StatusNotFound, "no live server holds "+strconv.Quote(n))
		return
	}
	out := NameJSON(info)
	if client.IsValid() && a.o.Told != nil {
		out.Told = a.told(n, client, false)
		if tls := a.told(n, client, true); *tls != *out.Told {
			out.Told.TLS = tls
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// told is what client is told for name, offering tls or not.
func (a *api) told(name string, client netip.Addr, tls bool) *Told {
	c := a.o.Told(name, client, tls)
	t := &Told{Client: client.String(), Withheld: c.Withheld}
	if c.Withheld != "" {
		return t
	}
	t.Port, t.Protocol, t.Any = c.Port, c.Protocol, c.Addr.IsAny()
	if !t.Any {
		t.Endpoint = netip.AddrPortFrom(c.Addr.Addr(), c.Port).String()
	}
	return t
}

func (a *api) duplicates(w http.ResponseWriter, r *http.Request) {
	offset, limit, ok := pageParams(w, r)
	if !ok {
		return
	}
	done, ok := a.render(w, r)
	if !ok {
		return
	}
	defer done()
	v := a.o.Registry.View()
	rows := page(w, v.Duplicates, offset, limit)
	out := make([]Duplicate, 0, len(rows))
	for _, d := range rows { // by name, then claim order
		out = append(out, DuplicateJSON(d))
	}
	setRevision(w, v.Revision)
	writeJSON(w, http.StatusOK, out)
}

// Changes is the answer of GET /v1/changes.
type Changes struct {
	Revision uint64 `json:"revision"`
}

// changes answers GET /v1/changes?revision=N&wait=D: the registry's
// revision, as soon as it differs from N or after the wait. It waits on
// the registry's watch channel, so a change answers at once.
func (a *api) changes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	lim := a.o.lim.Load()
	maxWait := max(lim.WriteTimeout-WaitMargin, 0)
	wait := maxWait
	if s := q.Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			writeErr(w, http.StatusBadRequest, "bad wait "+strconv.Quote(s)+": want a duration such as 25s")
			return
		}
		wait = min(d, maxWait)
	}
	since, given := uint64(0), false
	if s := q.Get("revision"); s != "" {
		var err error
		if since, err = strconv.ParseUint(s, 10, 64); err != nil {
			writeErr(w, http.StatusBadRequest, "bad revision "+strconv.Quote(s)+": want the number a previous answer gave")
			return
		}
		given = true
	}
	rev, changed := a.o.Registry.Revision()
	if given && since == rev && wait > 0 {
		if !a.wait(w, r, changed, wait, lim.MaxConns) {
			return
		}
		rev, _ = a.o.Registry.Revision()
	}
	setRevision(w, rev)
	writeJSON(w, http.StatusOK, Changes{Revision: rev})
}

// wait blocks until changed is closed, the wait passes or the service
// shuts down. At most half of maxConns requests wait at once, so waiting
// pages never hold every connection (no bound without one); beyond that it
// answers 503 and returns false, as it does when the client has gone.
func (a *api) wait(w http.ResponseWriter, r *http.Request, changed <-chan struct{}, wait time.Duration, maxConns int) bool {
	if n := a.waiting.Add(1); maxConns > 0 && n > int64(maxConns/2) {
		a.waiting.Add(-1)
		a.o.cnt.waitersBusy.Add(1)
		a.ll.Hit("http_waiters", "long polls already waiting; /v1/changes answered 503", zap.Int("max_waiting", maxConns/2))
		w.Header().Set("Retry-After", "5")
		writeErr(w, http.StatusServiceUnavailable, "too many requests waiting; retry")
		return false
	}
	defer a.waiting.Add(-1)
	timeout := make(chan struct{})
	t := a.o.Clock.AfterFunc(wait, func() { close(timeout) })
	defer t.Stop()
	select {
	case <-changed:
	case <-timeout:
	case <-a.o.closing:
	case <-r.Context().Done():
		return false
	}
	return true
}

func (a *api) events(w http.ResponseWriter, r *http.Request) {
	var ev []events.Event
	if a.o.Events != nil {
		ev = a.o.Events.Recent(200)
	}
	if ev == nil {
		ev = []events.Event{}
	}
	writeJSON(w, http.StatusOK, ev)
}

// discover sends a discovery round. It is the one endpoint that acts, so
// it is never a "simple" cross-site request — a web page a browser shows
// cannot send it without a CORS preflight, which pvans never grants — and
// it sends at most one round per DiscoverInterval.
func (a *api) discover(w http.ResponseWriter, r *http.Request) {
	if a.o.Discover == nil {
		writeErr(w, http.StatusServiceUnavailable, "discovery is not available")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		a.o.cnt.discoverRefused.Add(1)
		writeErr(w, http.StatusUnsupportedMediaType, `send Content-Type: application/json (a JSON body such as {} or none)`)
		return
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		a.o.cnt.discoverRefused.Add(1)
		writeErr(w, http.StatusForbidden, "cross-site requests are refused")
		return
	}
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		a.o.cnt.bodyTooLarge.Add(1)
		writeErr(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", MaxBodyBytes))
		return
	}
	now := a.o.Clock.Now()
	a.discoverMu.Lock()
	iv := a.o.lim.Load().DiscoverInterval
	wait := a.lastDiscover.Add(iv).Sub(now)
	if !a.lastDiscover.IsZero() && wait > 0 {
		a.discoverMu.Unlock()
		a.o.cnt.discoverLimited.Add(1)
		a.ll.Hit("http_discover_rate", "POST /v1/discover over its rate; answered 429",
			zap.Duration("discover_interval", a.o.Limits.DiscoverInterval), zap.String("client", r.RemoteAddr))
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		writeErr(w, http.StatusTooManyRequests, "a discovery round was sent less than "+iv.String()+" ago; retry after "+wait.Round(time.Second).String())
		return
	}
	a.lastDiscover = now
	a.discoverMu.Unlock()
	if err := a.o.Discover(); err != nil {
		writeErr(w, http.StatusInternalServerError, "discovery failed: "+err.Error())
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "discovery round sent"})
}

// shortGUID is used by the status page.
func shortGUID(g string) string {
	if len(g) > 12 {
		return g[:12] + "…"
	}
	return g
}
