package daemon

import (
	"net/netip"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/searchring"
	"github.com/pvans-project/pvans/internal/udpsearch"
)

// beaconFilter applies the server allow list before the tracker sees a
// sighting: a host outside it cannot make pvans register (and answer with)
// its names just by beaconing.
type beaconFilter struct{ d *Daemon }

func (f beaconFilter) Observe(o beacon.Observation) {
	if o.GUID == f.d.guid {
		return // our own beacon or discovery answer, heard back
	}
	if !f.d.conf().Access.ServerAllowed(o.Endpoint.Addr()) {
		f.d.deniedServers.Add(1)
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

// onBeaconEvent turns tracker events into registry rows and probes.
func (d *Daemon) onBeaconEvent(ev beacon.Event) {
	fields := []zap.Field{zap.Stringer("guid", ev.GUID), zap.Stringer("endpoint", ev.Endpoint), zap.Stringer("via", ev.Via)}
	switch ev.Kind {
	case beacon.EventNew, beacon.EventChanged:
		info := registry.ServerInfo{GUID: ev.GUID, Addr: ev.Endpoint, Protocol: ev.Protocol, Version: ev.Version,
			Discovered: viaSource(ev.Via), ChangeCount: ev.ChangeCount, LastSeen: ev.At}
		if _, err := d.Registry.UpsertServer(info); err != nil {
			d.log.Warn("server not registered", append(fields, zap.Error(err))...)
			return
		}
		kind, why, poke := "appeared", probe.ReasonNew, searchring.PokeBeacon
		if ev.Via == beacon.ViaDiscovery {
			poke = searchring.PokeDiscovery
		}
		if ev.Kind == beacon.EventChanged {
			// The registry itself drops the old GUID when a new one takes
			// its endpoint (UpsertServer above), names and all.
			kind, why = "restarted", probe.ReasonChanged
		}
		d.Events.Add(events.Event{At: ev.At, Kind: kind, GUID: ev.GUID.String(), Endpoint: ev.Endpoint.String(), Detail: "via " + ev.Via.String()})
		d.Prober.Probe(ev.GUID, ev.Endpoint, why)
		d.Ring.Poke(poke)
	case beacon.EventSourcesChanged:
		_, _ = d.Registry.UpsertServer(registry.ServerInfo{GUID: ev.GUID, Addr: ev.Endpoint, Protocol: ev.Protocol,
			Version: ev.Version, Discovered: viaSource(ev.Via), ChangeCount: ev.ChangeCount, LastSeen: ev.At})
		d.Events.Add(events.Event{At: ev.At, Kind: "sources changed", GUID: ev.GUID.String(), Endpoint: ev.Endpoint.String()})
		d.Prober.Probe(ev.GUID, ev.Endpoint, probe.ReasonSourcesChanged)
	case beacon.EventLost:
		d.log.Info("server lost: no beacon within the expiry", fields...)
		d.Events.Add(events.Event{At: ev.At, Kind: "lost", GUID: ev.GUID.String(), Endpoint: ev.Endpoint.String(), Detail: "beacon expired"})
		d.Prober.Forget(ev.Endpoint)
		_ = d.Registry.RemoveServer(ev.GUID)
		d.serverGone(ev.GUID)
	}
}

// probeSink receives probe results.
type probeSink struct{ d *Daemon }

func (s probeSink) Listed(guid pva.GUID, ep netip.AddrPort, names []string, info probe.Info) {
	d := s.d
	if _, ok := d.Registry.Server(guid); !ok {
		// A static server, or one whose watch connection was lost and came
		// back (the loss removed it): say how it is really known.
		how := registry.SourceStatic
		if e, ok := d.Tracker.Lookup(ep, "tcp"); ok && e.GUID == guid {
			how = viaSource(e.Via)
		}
		if _, err := d.Registry.UpsertServer(registry.ServerInfo{GUID: guid, Addr: ep, Discovered: how, LastSeen: time.Now()}); err != nil {
			d.log.Warn("listed server not registered", zap.Stringer("guid", guid), zap.Stringer("endpoint", ep), zap.Error(err))
			return
		}
	}
	how := registry.SourceProbe
	if info.File != "" {
		how = registry.SourceStatic
	}
	if err := d.Registry.ReplaceNames(guid, names, how); err != nil {
		d.log.Warn("names not registered", zap.Stringer("guid", guid), zap.Stringer("endpoint", ep), zap.Error(err))
	}
	_ = d.Registry.SetProbeState(guid, registry.ProbeListed, nil)
	detail := "listed"
	if info.File != "" {
		detail = "static names from " + info.File
	}
	d.Events.Add(events.Event{At: time.Now(), Kind: "listed", GUID: guid.String(), Endpoint: ep.String(),
		Detail: detail + " (" + strconv.Itoa(len(names)) + " names)"})
}

func (s probeSink) Unlistable(guid pva.GUID, ep netip.AddrPort, err error) {
	d := s.d
	_ = d.Registry.SetProbeState(guid, registry.ProbeFailed, err)
	d.Events.Add(events.Event{At: time.Now(), Kind: "unlistable", GUID: guid.String(), Endpoint: ep.String(), Detail: errString(err)})
	d.askUnlistable(ep, err)
}

func (s probeSink) Lost(guid pva.GUID, ep netip.AddrPort, reason string) {
	d := s.d
	d.log.Info("server lost: watch connection ended", zap.Stringer("guid", guid), zap.Stringer("endpoint", ep), zap.String("reason", reason))
	_ = d.Registry.RemoveServer(guid)
	d.serverGone(guid)
	d.Events.Add(events.Event{At: time.Now(), Kind: "lost", GUID: guid.String(), Endpoint: ep.String(), Detail: reason})
}

// onUDPSearchResponse gets every search response heard on the UDP
// sockets; the search ring takes the positive ones.
func (d *Daemon) onUDPSearchResponse(from netip.AddrPort, m *pva.SearchResponse) {
	d.Ring.OnReply(from, false, m)
}

// onSearchResolved enters a search-through answer into the registry,
// which pushes it to every waiting client.
func (d *Daemon) onSearchResolved(name string, guid pva.GUID, ep netip.AddrPort) {
	if !d.conf().Access.ServerAllowed(ep.Addr()) {
		d.deniedServers.Add(1)
		return
	}
	if _, ok := d.Registry.Server(guid); !ok {
		if _, err := d.Registry.UpsertServer(registry.ServerInfo{GUID: guid, Addr: ep, Discovered: registry.SourceSearchThrough, LastSeen: time.Now()}); err != nil {
			d.log.Warn("search-through server not registered", zap.Stringer("guid", guid), zap.Stringer("endpoint", ep), zap.Error(err))
			return
		}
		// A server we had not heard of: list it, and keep watch on it.
		d.Prober.Probe(guid, ep, probe.ReasonNew)
	}
	if err := d.Registry.AddName(guid, name, registry.SourceSearchThrough); err != nil {
		d.log.Warn("search-through name not registered", zap.String("name", name), zap.Stringer("guid", guid), zap.Error(err))
	}
}

func (d *Daemon) onSearchDuplicate(name string, first, second pva.GUID) {
	d.log.Warn("duplicate PV name: two servers claim it", zap.String("name", name), zap.Stringer("guid", first), zap.Stringer("other_guid", second))
	d.Events.Add(events.Event{At: time.Now(), Kind: "duplicate", GUID: second.String(), Detail: name + " also claimed (first: " + first.String() + ")"})
}

var _ udpsearch.BeaconSink = beaconFilter{}

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

func (v regView) Servers() []registry.ServerInfo {
	ss := v.Registry.Servers()
	for i := range ss {
		v.lastSeen(&ss[i])
	}
	return ss
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
	if s, ok := v.Registry.Server(h.GUID); ok {
		ni.How = s.ListedHow
		ni.At = s.ListedAt
	}
	return ni, true
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
