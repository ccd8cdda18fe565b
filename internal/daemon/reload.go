package daemon

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/udpsearch"
)

// conf is the configuration in force.
func (d *Daemon) conf() *config.Config { return d.cur.Load() }

// Reload applies next, the configuration loaded again from the same
// sources, to the running daemon. It returns the settings it applied and
// those that differ from the running daemon's but take effect only at the
// next start (config.NeedsRestart), each of which it logs as needing a
// restart. The parts the changed settings name apply them (appliers.go).
// next must be valid (config.Reload refuses an invalid file, and the
// daemon keeps its last good configuration).
func (d *Daemon) Reload(next *config.Config) (applied, needRestart []string) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	prev := d.conf()
	changed := config.Changed(prev, next)
	for _, k := range changed {
		if restart, _ := config.NeedsRestart(k); !restart {
			applied = append(applied, k)
		}
	}
	// Compared with what runs (d.boot), so every reload repeats the warning
	// until the daemon is restarted.
	for _, k := range config.Changed(d.boot, next) {
		if restart, why := config.NeedsRestart(k); restart {
			needRestart = append(needRestart, k)
			d.log.Warn("setting changed; needs restart", zap.String("setting", k), zap.String("why", why))
		}
	}
	// The web configuration file is read again per request, but TLS is
	// turned on or off only at start.
	if f := next.HTTP.WebConfigFile; f != "" && f == d.boot.HTTP.WebConfigFile && d.httpLn != nil {
		if on, err := httpapi.CheckWebConfig(f); err == nil && on != d.httpSrv.TLS() {
			needRestart = append(needRestart, "http.web_config_file")
			d.log.Warn("web configuration file changed; needs restart", zap.String("setting", "http.web_config_file"),
				zap.String("why", "tls_server_config was added or removed; the listener keeps serving as it started"), zap.Bool("tls", d.httpSrv.TLS()))
		}
	}
	for _, k := range applied {
		parts, when := config.AppliedBy(k)
		d.log.Debug("setting applied", zap.String("setting", k), zap.Any("parts", parts), zap.String("when", when))
	}
	d.cur.Store(next)
	d.apply(prev, next, changed)
	d.Events.Add(events.Event{At: d.clk.Now(), Kind: "reload", Detail: reloadDetail(applied, needRestart)})
	return applied, needRestart
}

func reloadDetail(applied, restart []string) string {
	s := "configuration reloaded"
	if len(applied) > 0 {
		s += "; applied: " + joinKeys(applied)
	}
	if len(restart) > 0 {
		s += "; needs restart: " + joinKeys(restart)
	}
	return s
}

func joinKeys(k []string) string { return strings.Join(k, ", ") }

// forgetUnlisted drops the servers taken off the static list that nothing
// else announces (no beacon or discovery reply is tracked for them): the
// operator removed the only reason pvans knew them.
func (d *Daemon) forgetUnlisted(before, after []netip.AddrPort) {
	for _, ep := range before {
		if slices.Contains(after, ep) {
			continue
		}
		if _, seen := d.Tracker.Lookup(ep, "tcp"); seen {
			continue
		}
		d.Prober.Forget(ep)
		for _, s := range d.Registry.Servers() {
			if s.Addr == ep {
				d.log.Info("server removed from static.servers: forgotten", zap.Stringer("guid", s.GUID), zap.Stringer("endpoint", ep))
				_ = d.Registry.RemoveServer(s.GUID)
			}
		}
	}
}

// destinations are the search destinations (addr_list, plus the interface
// broadcast addresses with auto_addr_list) and the beacon destinations.
// The interface list is read again each time: a reload also picks up
// interfaces added since the start.
func (d *Daemon) destinations(cfg *config.Config) (addrList, beaconList []udpsearch.Destination) {
	// Discovery and search-through look for servers: their automatic
	// destinations are the broadcast addresses of the interfaces servers
	// are learned from, so a gateway host learning on its IOC leg sends
	// nothing to its client leg. pvans's own beacons are for clients,
	// and keep going to every interface's.
	auto := func(on []netip.Addr) []udpsearch.Destination {
		l, err := udpsearch.AutoAddrList(d.boot.PVA.BroadcastPort, on)
		if err != nil {
			d.log.Warn("cannot read interface broadcast addresses for the auto address lists", zap.Error(err))
		}
		return udpsearch.Unicast(l...)
	}
	addrList = endpoints(d.expand(cfg.PVA.AddrList))
	if cfg.PVA.AutoAddrList {
		addrList = append(addrList, auto(learnFrom(d.boot.PVA.Interfaces, cfg.UDP.LearnInterfaces))...)
	}
	beaconList = endpoints(cfg.PVA.BeaconAddrList)
	if cfg.UDP.SendBeacons && cfg.PVA.AutoBeaconAddrList {
		beaconList = append(beaconList, auto(nil)...)
	}
	return addrList, beaconList
}

// endpoints carries the address lists' multicast TTLs and interfaces to
// the UDP participant.
func endpoints(l []config.Endpoint) []udpsearch.Destination {
	out := make([]udpsearch.Destination, len(l))
	for i, e := range l {
		out[i] = udpsearch.Destination{Addr: e.AddrPort, TTL: e.TTL, Iface: e.Iface}
	}
	return out
}

// reloadKeychain reads the Secure PVAccess keychain again (SIGHUP): a
// renewed certificate serves the next handshake. A keychain that cannot
// be used is refused and the one in force stays (an event and a metric
// say so). Starting or stopping the TLS listener needs a restart.
func (d *Daemon) reloadKeychain(next *config.Config) {
	if d.Keys == nil {
		if next.PVA.TLSKeychain != "" {
			d.log.Warn("setting changed; needs restart", zap.String("setting", "pva.tls_keychain"),
				zap.String("why", "the TLS listener is opened at start"))
		}
		return
	}
	if next.PVA.TLSKeychain == "" {
		d.log.Warn("setting changed; needs restart", zap.String("setting", "pva.tls_keychain"),
			zap.String("why", "the TLS listener stays open until a restart; the keychain in force stays"))
		return
	}
	if err := d.Keys.Reload(next.PVA.TLSKeychain, d.clk.Now()); err != nil {
		d.log.Error("keychain not reloaded; the one in force stays", zap.Error(err))
		d.Events.Add(events.Event{At: d.clk.Now(), Kind: "keychain refused", Detail: err.Error()})
		return
	}
	k := d.Keys.Current()
	d.log.Info("Secure PVAccess keychain reloaded", zap.String("file", k.Path),
		zap.String("subject", k.Leaf.Subject.String()), zap.Time("not_after", k.NotAfter()))
	d.Events.Add(events.Event{At: d.clk.Now(), Kind: "keychain reloaded",
		Detail: k.Leaf.Subject.String() + " until " + k.NotAfter().UTC().Format(time.RFC3339)})
}
