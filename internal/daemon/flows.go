package daemon

import (
	"errors"
	"net/netip"
	"slices"
	"strconv"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/insight"
	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/searchring"
	"github.com/pvans-project/pvans/internal/udpsearch"
)

// beaconFilter passes sightings to the tracker. udpsearch has already
// applied the hint rules (sender address, access.server_allow on sender
// and server, protocol, rate; see udpsearch.Options.ServerAllowed).
type beaconFilter struct{ d *Daemon }

func (f beaconFilter) Observe(o beacon.Observation) {
	if o.GUID == f.d.guid {
		return // our own beacon or discovery answer, heard back
	}
	if f.d.relayed(o) {
		return
	}
	f.d.Tracker.Observe(o)
}

func viaSource(v beacon.Via) registry.Source {
	if v == beacon.ViaDiscovery {
		return registry.SourceDiscovery
	}
	return registry.SourceBeacon
}

// onBeaconEvent turns tracker events into probes. A tracker event comes
// from UDP datagrams, which anyone can forge: it may create a server row
// with no names, refresh one, and ask for a probe, but only the probe's
// TCP listing (probeSink.Listed → Registry.Listed) changes who claims what
// (docs/SECURITY.md, "Trust").
func (d *Daemon) onBeaconEvent(ev beacon.Event) {
	fields := []zap.Field{zap.Stringer("guid", ev.GUID), zap.Stringer("endpoint", ev.Endpoint), zap.Stringer("via", ev.Via)}
	if ev.GUID.IsPvans() && ev.Kind != beacon.EventLost {
		d.onReplica(ev, fields)
		return
	}
	switch ev.Kind {
	case beacon.EventNew, beacon.EventChanged:
		info := registry.ServerInfo{GUID: ev.GUID, Addr: ev.Endpoint, Protocol: ev.Protocol, Version: ev.Version,
			Discovered: viaSource(ev.Via), ChangeCount: ev.ChangeCount, LastSeen: ev.At}
		_, err := d.Registry.UpsertServer(info)
		if err != nil && !errors.Is(err, registry.ErrEndpointHeld) {
			d.log.Warn("server not registered", append(fields, zap.Error(err))...)
			return
		}
		kind, why, poke := "appeared", probe.ReasonNew, searchring.PokeBeacon
		if ev.Via == beacon.ViaDiscovery {
			poke = searchring.PokeDiscovery
		}
		if ev.Kind == beacon.EventChanged || err != nil {
			// A restart claim: the old server keeps its names until the
			// probe confirms the new GUID over TCP.
			kind, why = "restart claimed", probe.ReasonChanged
			defer d.anomaly(insight.AnomalyGUIDChurn, ev.GUID, ev.Endpoint)(d.Insight.GUIDChanged(ev.Endpoint, ev.At))
		}
		if kind == "appeared" {
			d.log.Info("server appeared", fields...)
		} else {
			// Info, as its event: the log and /v1/events name the same
			// steps (the log budget bounds a forged flood of them).
			d.log.Info("server restart claimed", append(fields, zap.Stringer("old_guid", ev.OldGUID))...)
		}
		d.Events.Add(events.Event{At: ev.At, Kind: kind, GUID: ev.GUID.String(), Endpoint: ev.Endpoint.String(), Detail: "via " + ev.Via.String()})
		d.Prober.Probe(ev.GUID, ev.Endpoint, why)
		d.Ring.Poke(poke)
	case beacon.EventSourcesChanged:
		_, _ = d.Registry.UpsertServer(registry.ServerInfo{GUID: ev.GUID, Addr: ev.Endpoint, Protocol: ev.Protocol,
			Version: ev.Version, Discovered: viaSource(ev.Via), ChangeCount: ev.ChangeCount, LastSeen: ev.At})
		d.Events.Add(events.Event{At: ev.At, Kind: "sources changed", GUID: ev.GUID.String(), Endpoint: ev.Endpoint.String()})
		d.Prober.Probe(ev.GUID, ev.Endpoint, probe.ReasonSourcesChanged)
	case beacon.EventEvicted:
		// A full table made room for a new endpoint: this one was never
		// proven over TCP (beaconProven). Its probe and empty row go,
		// unless the prober proved it meanwhile or holds it for another
		// reason (static, another GUID): that is decided under its lock.
		if !d.Prober.ForgetUnproven(ev.Endpoint, ev.GUID) {
			return
		}
		if s, ok := d.Registry.Server(ev.GUID); ok && s.Addr == ev.Endpoint && s.Names == 0 &&
			s.ProbeState != registry.ProbeListed && s.ListedHow != registry.SourceStatic {
			_ = d.Registry.RemoveServer(ev.GUID)
		}
	case beacon.EventLost:
		if g, ok := d.Prober.Watching(ev.Endpoint); ok {
			// Missing beacons are no proof: the watch connection answers.
			if ev.Via == beacon.ViaDiscovery {
				// Last heard from by a discovery reply: a server that sends
				// no beacons at all (the Phoebus Java server) has stopped
				// nothing, and its watch connection is how pvans knows it.
				d.log.Debug("no discovery reply within the expiry, but the watch connection is up: kept", append(fields, zap.Stringer("watched_guid", g))...)
				return
			}
			d.log.Info("no beacon within the expiry, but the watch connection is up: kept", append(fields, zap.Stringer("watched_guid", g))...)
			d.anomaly(insight.AnomalyBeaconsStopped, g, ev.Endpoint)(d.Insight.BeaconsStopped(ev.Endpoint, ev.At))
			return
		}
		d.Prober.Forget(ev.Endpoint)
		if s, ok := d.Registry.Server(ev.GUID); !ok || s.Addr != ev.Endpoint {
			// Already reported: its watch connection ended first (a hung
			// server is lost at its echo, minutes before its beacons
			// expire). One loss is told once.
			d.log.Debug("beacon expired for a server already lost", fields...)
			return
		}
		d.logLost(ev.GUID, ev.Endpoint, "no beacon within the expiry")
		d.Events.Add(events.Event{At: ev.At, Kind: "lost", GUID: ev.GUID.String(), Endpoint: ev.Endpoint.String(), Detail: "beacon expired"})
		d.noteDown(ev.GUID, ev.Endpoint, "beacon expired")
		d.removeAt(ev.GUID, ev.Endpoint)
		if ev.GUID.IsPvans() {
			d.refreshReplicas()
		}
	}
}

// onReplica registers another pvans (its GUID carries the pvans mark,
// pva.GUID.IsPvans) as a replica: a row with no names, never probed, so
// never a failing server. Replicas list no names (serverpv) and may
// refuse our TCP connections (access.tcp_client_allow); a probe would
// only fail or list nothing. A replica restarted under a new GUID takes
// the old one's row; a pvans GUID at an endpoint another server holds
// changes nothing (a forged beacon cannot displace a server's names).
func (d *Daemon) onReplica(ev beacon.Event, fields []zap.Field) {
	info := registry.ServerInfo{GUID: ev.GUID, Addr: ev.Endpoint, Protocol: ev.Protocol, Version: ev.Version,
		Discovered: viaSource(ev.Via), ChangeCount: ev.ChangeCount, LastSeen: ev.At}
	_, err := d.Registry.UpsertServer(info)
	if errors.Is(err, registry.ErrEndpointHeld) && ev.Kind == beacon.EventChanged && ev.OldGUID.IsPvans() {
		d.removeAt(ev.OldGUID, ev.Endpoint)
		_, err = d.Registry.UpsertServer(info)
	}
	if err != nil {
		d.log.Debug("replica not registered", append(fields, zap.Error(err))...)
		return
	}
	d.refreshReplicas()
	if ev.Kind == beacon.EventSourcesChanged {
		return // its registry changed; nothing of ours did
	}
	what := "replica appeared"
	if ev.Kind == beacon.EventChanged {
		what = "replica restarted"
		fields = append(fields, zap.Stringer("old_guid", ev.OldGUID))
	}
	d.log.Info(what, fields...)
	d.Events.Add(events.Event{At: ev.At, Kind: "replica", GUID: ev.GUID.String(), Endpoint: ev.Endpoint.String(),
		Detail: what + " (another pvans), via " + ev.Via.String()})
}

// logLost is the one line for a server lost, whatever noticed it.
func (d *Daemon) logLost(g pva.GUID, ep netip.AddrPort, reason string) {
	msg := "server lost"
	if g.IsPvans() {
		msg = "replica lost"
	}
	d.log.Info(msg, zap.Stringer("guid", g), zap.Stringer("endpoint", ep), zap.String("reason", reason))
}

// beaconProven is the tracker's Proven: a server listed over TCP (or
// from a static name file), or one the prober holds as static, listed or
// watched. Only entries that beacons
// alone put in the table may be evicted at its limit.
func (d *Daemon) beaconProven(e beacon.Entry) bool {
	if s, ok := d.Registry.Server(e.GUID); ok && s.Addr == e.Endpoint &&
		(s.Names > 0 || s.ProbeState == registry.ProbeListed || s.ListedHow == registry.SourceStatic) {
		return true
	}
	return d.Prober.Proven(e.Endpoint)
}

// removeAt removes g if it is registered at ep with names of its own (a
// static name file's server is removed only by its file).
func (d *Daemon) removeAt(g pva.GUID, ep netip.AddrPort) {
	if s, ok := d.Registry.Server(g); ok && s.Addr == ep && s.ListedHow != registry.SourceStatic {
		_ = d.Registry.RemoveServer(g)
	}
}

// probeSink receives probe results: the TCP facts.

// anomaly returns a function that logs a beacon anomaly event when insight
// says one is due (insight decides, at most once an hour per endpoint).
func (d *Daemon) anomaly(kind string, g pva.GUID, ep netip.AddrPort) func(string, bool) {
	return func(detail string, due bool) {
		if due {
			d.log.Warn("beacon anomaly", zap.String("kind", kind), zap.Stringer("endpoint", ep), zap.String("detail", detail))
			d.Events.Add(events.Event{At: d.clk.Now(), Kind: "anomaly: " + kind, GUID: g.String(), Endpoint: ep.String(), Detail: detail})
		}
	}
}

// probeSink receives probe results.
type probeSink struct{ d *Daemon }

func (s probeSink) Listed(guid pva.GUID, ep netip.AddrPort, names []string, info probe.Info) {
	d := s.d
	if info.File != "" {
		s.staticFile(guid, ep, names, info)
		return
	}
	// The allow list is checked where names move, not only where a hint
	// arrived: a probe started while the endpoint was allowed may finish
	// after a reload narrowed the list.
	if !d.conf().Access.ServerAllowed(ep.Addr()) {
		d.deniedServers.Add(1)
		d.log.Info("listed server outside access.server_allow: not registered", zap.Stringer("guid", guid), zap.Stringer("endpoint", ep))
		d.Prober.Forget(ep)
		return
	}
	// How the server was first heard of, if this listing creates it (a
	// static server, or one whose lost watch came back).
	how := registry.SourceStatic
	var prev pva.GUID // the GUID it replaced at the endpoint, by the tracker
	if e, ok := d.Tracker.Lookup(ep, "tcp"); ok && e.GUID == guid {
		how, prev = viaSource(e.Via), e.PrevGUID
	}
	// A re-listing with nothing new is not news for the log.
	before, known := d.Registry.Server(guid)
	news := !known || before.ProbeState != registry.ProbeListed || !before.Verified || before.Names != len(names) || before.Addr != ep
	replaced, err := d.Registry.Listed(registry.ServerInfo{GUID: guid, Addr: ep, TLS: info.TLS, Identity: info.Identity, Discovered: how, LastSeen: d.clk.Now()}, names, registry.SourceProbe)
	switch {
	case errors.Is(err, registry.ErrGUIDElsewhere), errors.Is(err, registry.ErrServerLimit), errors.Is(err, registry.ErrIdentity):
		d.log.Warn("listed server not registered", zap.Stringer("guid", guid), zap.Stringer("endpoint", ep), zap.Error(err))
		d.Events.Add(events.Event{At: d.clk.Now(), Kind: "not registered", GUID: guid.String(), Endpoint: ep.String(), Detail: err.Error()})
		return
	case err != nil:
		d.log.Warn("names not registered", zap.Stringer("guid", guid), zap.Stringer("endpoint", ep), zap.Error(err))
	}
	for _, old := range replaced {
		d.Events.Add(events.Event{At: d.clk.Now(), Kind: "restarted", GUID: guid.String(), Endpoint: ep.String(),
			Detail: "replaces " + old.String() + " (confirmed over TCP)"})
	}
	if news {
		// Restarted: the registry replaced the old GUID, or the old one
		// was lost first (its watch closed as it stopped) and the
		// tracker saw this GUID take the endpoint over.
		if len(replaced) > 0 {
			prev = replaced[0]
		}
		if !prev.IsZero() && prev != guid && (len(replaced) > 0 || !known || before.ProbeState == registry.ProbeNone) {
			d.log.Info("server restarted", zap.Stringer("guid", guid), zap.Stringer("endpoint", ep), zap.Stringer("old_guid", prev))
			if len(replaced) == 0 {
				// The old instance was lost first: the step the log
				// names is an event too (a replacement made one above).
				d.Events.Add(events.Event{At: d.clk.Now(), Kind: "restarted", GUID: guid.String(), Endpoint: ep.String(),
					Detail: "replaces " + prev.String() + " (confirmed over TCP)"})
			}
			// The clients pvans told the old instance were answered again
			// as the registry committed (resolver, told.go); a client
			// that reacts to beacons hears pvans's change count move now,
			// not at the next beacon (if pvans beacons at all).
			d.UDP.BeaconNow()
		}
		d.log.Info("server listed", zap.Stringer("guid", guid), zap.Stringer("endpoint", ep), zap.Int("names", len(names)),
			zap.Duration("took", info.Took))
	}
	_ = d.Registry.SetProbeState(guid, registry.ProbeListed, nil)
	d.Down.Back(ep)
	d.Events.Add(events.Event{At: d.clk.Now(), Kind: "listed", GUID: guid.String(), Endpoint: ep.String(),
		Detail: "listed (" + nameCount(len(names)) + tlsDetail(info) + ")"})
}

// noteDown keeps a server being lost as down for the operator's views,
// if it was one: listed over TCP (a row only beacons made, forged or not,
// is no server an operator knew), and not another pvans.
func (d *Daemon) noteDown(g pva.GUID, ep netip.AddrPort, reason string) {
	s, ok := d.Registry.Server(g)
	if !ok || s.Addr != ep || g.IsPvans() || s.ListedHow == registry.SourceStatic ||
		(s.ProbeState != registry.ProbeListed && s.Names == 0) {
		return
	}
	d.Down.Lost(events.DownServer{GUID: g.String(), Endpoint: ep, Since: d.clk.Now(), Reason: reason, Names: s.Names,
		Protocol: s.Protocol, Discovered: s.Discovered.String(), FirstSeen: s.FirstSeen, LastSeen: s.LastSeen})
}

// staticFile registers a static name file's names: a claim of its own,
// beside (never replacing or replaced by) a real server at the endpoint.
func (s probeSink) staticFile(guid pva.GUID, ep netip.AddrPort, names []string, info probe.Info) {
	d := s.d
	if _, err := d.Registry.UpsertServer(registry.ServerInfo{GUID: guid, Addr: ep, Discovered: registry.SourceStatic, LastSeen: d.clk.Now()}); err != nil && !errors.Is(err, registry.ErrEndpointHeld) {
		d.log.Warn("static names not registered", zap.Stringer("endpoint", ep), zap.String("file", info.File), zap.Error(err))
		return
	}
	if err := d.Registry.ReplaceNames(guid, names, registry.SourceStatic); err != nil {
		d.log.Warn("names not registered", zap.Stringer("guid", guid), zap.Stringer("endpoint", ep), zap.Error(err))
	}
	d.Events.Add(events.Event{At: d.clk.Now(), Kind: "listed", GUID: guid.String(), Endpoint: ep.String(),
		Detail: "static names from " + info.File + " (" + nameCount(len(names)) + ")"})
}

// nameCount is "1 name" or "N names", for event details people read.
func nameCount(n int) string {
	if n == 1 {
		return "1 name"
	}
	return strconv.Itoa(n) + " names"
}

// Unlistable: the probe's failure is shown as a category (refused,
// timeout, not_pva, unlistable); the raw error, which would make pvans a
// port scanner's oracle, is logged at debug level only.
func (s probeSink) Unlistable(guid pva.GUID, ep netip.AddrPort, err error) {
	d := s.d
	cat := probe.Category(err)
	if ce := d.log.Check(zap.DebugLevel, "probe failed"); ce != nil {
		ce.Write(zap.Stringer("guid", guid), zap.Stringer("endpoint", ep), zap.String("category", cat), zap.Error(err))
	}
	if d.earned(guid, ep) {
		if d.snapshotServerGone(guid, ep, cat) {
			return
		}
		_ = d.Registry.SetProbeState(guid, registry.ProbeFailed, errors.New(cat))
		d.Events.Add(events.Event{At: d.clk.Now(), Kind: "unlistable", GUID: guid.String(), Endpoint: ep.String(), Detail: cat})
	}
	d.askUnlistable(ep, err)
}

// snapshotServerGone removes a server loaded from a snapshot and not yet
// reached over TCP in this run when the probe finds that it cannot be
// there: the connection is refused (nothing listens) or what answers is
// not a PVA server. The snapshot is itself only a claim; keeping it for
// snapshot.unverified_window would send clients to a dead endpoint and
// keep a server listed over TCP for the same names a duplicate. A server
// that answers but will not list, or a timeout (the host may be
// unreachable for a while), proves nothing and keeps the window.
func (d *Daemon) snapshotServerGone(guid pva.GUID, ep netip.AddrPort, cat string) bool {
	if cat != probe.FailRefused && cat != probe.FailNotPVA {
		return false
	}
	sv, ok := d.Registry.Server(guid)
	if !ok || sv.Addr != ep || sv.Verified || sv.ListedHow == registry.SourceStatic {
		return false
	}
	d.logLost(guid, ep, "from the snapshot, its endpoint does not serve PVA ("+cat+")")
	_ = d.Registry.RemoveServer(guid)
	d.serverGone(guid)
	if _, heard := d.Tracker.Lookup(ep, "tcp"); !heard {
		d.Prober.Forget(ep) // only the snapshot named it; a beacon brings it back
	}
	d.Events.Add(events.Event{At: d.clk.Now(), Kind: "lost", GUID: guid.String(), Endpoint: ep.String(), Detail: "from the snapshot, not there (" + cat + ")"})
	return true
}

// earned reports whether an endpoint has a place operators see: a
// registry row (a beacon, a listing, a confirmed search-through answer)
// or the static server list. Others were only named by search replies,
// which anyone can send: their probe failures are not shown, or pvans
// would tell whoever named an address what listens there.
func (d *Daemon) earned(guid pva.GUID, ep netip.AddrPort) bool {
	if sv, ok := d.Registry.Server(guid); ok && sv.Addr == ep {
		return true
	}
	return slices.Contains(d.lists.Load().static, ep)
}

func (s probeSink) Lost(guid pva.GUID, ep netip.AddrPort, reason string) {
	d := s.d
	if !d.earned(guid, ep) {
		d.log.Debug("server lost: watch connection ended", zap.Stringer("guid", guid), zap.Stringer("endpoint", ep), zap.String("reason", reason))
		return
	}
	d.logLost(guid, ep, reason)
	d.noteDown(guid, ep, reason)
	if sv, ok := d.Registry.Server(guid); ok && sv.Addr == ep {
		_ = d.Registry.RemoveServer(guid)
		d.serverGone(guid)
	}
	d.Events.Add(events.Event{At: d.clk.Now(), Kind: "lost", GUID: guid.String(), Endpoint: ep.String(), Detail: reason})
}

// onUDPSearchResponse gets every search response heard on the UDP
// sockets; the search ring takes the positive ones.
func (d *Daemon) onUDPSearchResponse(from netip.AddrPort, m *pva.SearchResponse) {
	d.Ring.OnReply(from, searchring.ViaUDP, m)
}

// onSearchResolved takes a search-through answer: a hint (it came over
// UDP, or from a name server speaking for another endpoint). The clients
// waiting for the name are answered at once — they would have believed
// that reply themselves — but the name is registered for everyone else
// only once the endpoint confirms it over TCP: its listing (the probe), or
// a TCP search answered under that GUID (Prober.Confirm). tls says whose
// search it answered: TLS clients' (a "tcp" answer to ["tls","tcp"]) or
// the others'.
func (d *Daemon) onSearchResolved(name string, tls bool, guid pva.GUID, ep netip.AddrPort) {
	if !d.conf().Access.ServerAllowed(ep.Addr()) {
		d.deniedServers.Add(1)
		return
	}
	d.Resolver.Answer(name, tls, resolver.Endpoint{GUID: guid, Addr: ep, Protocol: "tcp"})
	if h, ok := d.Registry.LookupName(name); ok && h.GUID == guid && h.Addr == ep {
		return
	}
	// A server we may not have heard of: list it and keep watch on it (a
	// new GUID at a known endpoint is verified there first).
	d.Prober.Probe(guid, ep, probe.ReasonSearchThrough)
	d.Prober.Confirm(guid, ep, []string{name}, func(confirmed []string) {
		if len(confirmed) == 0 || !d.conf().Access.ServerAllowed(ep.Addr()) {
			return // nothing confirmed, or the allow list changed meanwhile
		}
		if d.Prober.Gone(ep) {
			// The server's watch ended while the check ran: a row made
			// now would hold its names with nothing left to remove them
			// (and keep a live claimant's as duplicates). A loss reported
			// after this point removes what is registered below.
			d.log.Debug("search-through name confirmed by a server lost since", zap.String("name", name), zap.Stringer("guid", guid), zap.Stringer("endpoint", ep))
			return
		}
		_, err := d.Registry.UpsertServer(registry.ServerInfo{GUID: guid, Addr: ep, Discovered: registry.SourceSearchThrough, LastSeen: d.clk.Now()})
		if err != nil {
			// Another server holds the endpoint, or the GUID is elsewhere:
			// the probe's listing decides that.
			d.log.Debug("search-through name confirmed but not registered", zap.String("name", name), zap.Stringer("guid", guid), zap.Stringer("endpoint", ep), zap.Error(err))
			return
		}
		if err := d.Registry.AddNames(guid, confirmed, registry.SourceSearchThrough); err != nil {
			d.log.Warn("search-through name not registered", zap.String("name", name), zap.Stringer("guid", guid), zap.Error(err))
		}
		// The probe may have found the server unlistable before this
		// row existed (the report then had no row to mark).
		if d.Prober.Refuses(ep) {
			_ = d.Registry.SetProbeState(guid, registry.ProbeFailed, errors.New(probe.FailUnlistable))
		}
	})
}

func (d *Daemon) onSearchDuplicate(name string, first, second pva.GUID) {
	d.log.Warn("duplicate PV name: two servers claim it", zap.String("name", name), zap.Stringer("guid", first), zap.Stringer("other_guid", second))
	d.Events.Add(events.Event{At: d.clk.Now(), Kind: "duplicate", GUID: second.String(), Detail: name + " also claimed (first: " + first.String() + ")"})
}

var _ udpsearch.BeaconSink = beaconFilter{}

// refreshReplicas takes the addresses of the replicas registered now
// (rare: a replica appearing, restarting or lost).
func (d *Daemon) refreshReplicas() {
	m := map[netip.Addr]struct{}{}
	for _, s := range d.Registry.Servers() {
		if s.GUID.IsPvans() {
			m[s.Addr.Addr().Unmap()] = struct{}{}
		}
	}
	d.replicas.Store(&m)
}

// udpResolver is the resolver as the UDP side uses it: a search from
// another pvans (a replica whose addr_list names this host) is its own
// search-through, and is not searched through again for it. Two
// instances naming each other would otherwise keep each other's waiters,
// and each name's search, alive for ever after their clients left.
type udpResolver struct {
	*resolver.Resolver
	d *Daemon
}

func (r udpResolver) WaitUDP(to netip.AddrPort, q []pva.SearchName, missing []int, off resolver.Offer) {
	if m := r.d.replicas.Load(); m != nil {
		if _, ok := (*m)[to.Addr().Unmap()]; ok {
			return
		}
	}
	r.Resolver.WaitUDP(to, q, missing, off)
}

var _ udpsearch.UDPWaiter = udpResolver{}

// regView adapts the registry to the HTTP API. Beacons refresh only the
// tracker (touching the registry for each would take its writer lock at
// beacon rate), so a server's last sighting is the later of the two.
type regView struct {
	*registry.Registry
	tr *beacon.Tracker
}

func (v regView) lastSeen(s *registry.ServerInfo) {
	if e, ok := v.tr.Lookup(s.Addr, s.Protocol); ok && e.GUID == s.GUID && e.LastSeen.After(s.LastSeen) {
		s.LastSeen = e.LastSeen
	}
}

func (v regView) View() registry.View {
	w := v.Registry.View()
	for i := range w.Servers {
		v.lastSeen(&w.Servers[i])
	}
	return w
}

func (v regView) Server(g pva.GUID) (registry.ServerInfo, bool) {
	s, ok := v.Registry.Server(g)
	if ok {
		v.lastSeen(&s)
	}
	return s, ok
}

func (v regView) Name(name string) (registry.NameInfo, bool) {
	h, ok := v.Registry.LookupName(name)
	if !ok || h == nil {
		return registry.NameInfo{}, false
	}
	ni := registry.NameInfo{Name: name, GUID: h.GUID, Addr: h.Addr, How: registry.SourceUnknown}
	if h.TLSPort != 0 {
		ni.TLS = netip.AddrPortFrom(h.Addr.Addr(), h.TLSPort)
	}
	if s, ok := v.Registry.Server(h.GUID); ok {
		ni.How = s.ListedHow
		ni.At = s.ListedAt
	}
	return ni, true
}

// tlsDetail names a server's TLS endpoint, and the certificate identity
// the listing proved there, in an event's detail.
func tlsDetail(info probe.Info) string {
	switch {
	case !info.TLS.IsValid():
		return ""
	case info.Identity != "":
		return ", TLS " + info.TLS.String() + " proven: " + info.Identity
	case info.TLSErr != "":
		return ", TLS " + info.TLS.String() + " not proven: " + info.TLSErr
	}
	return ", TLS " + info.TLS.String()
}
