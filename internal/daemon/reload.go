package daemon

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/tcpsearch"
	"github.com/pvans-project/pvans/internal/udpsearch"
)

// This file is where settings reach the parts. New builds each part with
// what can never change (sockets, identity, callbacks) and then calls
// apply, as Reload does with a new configuration, so a setting is applied
// the same way at start and on reload.
//
// Each part takes its reloadable settings as one immutable value (a
// Policy, Limits or Timings) stored in an atomic pointer, so one search,
// datagram, probe or accept sees the old value or the new one, never a
// mix. To make a new setting reloadable, read it in the builder of its
// part below (tcpPolicy, udpPolicy, resolverPolicy, ...), add the field to
// that part's value, and read the field from the value the part loaded.
// A setting the running part cannot change is restart-only in its row
// (internal/config/settings.go) instead and is read from d.boot.

// conf is the configuration in force.
func (d *Daemon) conf() *config.Config { return d.cur.Load() }

// Reload applies next, the configuration loaded again from the same
// sources, to the running daemon. It returns the settings it applied and
// those that differ from the running daemon's but take effect only at the
// next start (config.NeedsRestart), each of which it logs as needing a
// restart. next must be valid (config.Reload refuses an invalid file, and
// the daemon keeps its last good configuration).
func (d *Daemon) Reload(next *config.Config) (applied, needRestart []string) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	prev := d.conf()
	for _, k := range config.Changed(prev, next) {
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
	d.apply(prev, next)
	d.reloadKeychain(next)
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

// apply gives every part its reloadable settings from next. prev is the
// configuration in force before (nil in New, before anything started).
func (d *Daemon) apply(prev, next *config.Config) {
	d.refreshLists(next)
	d.Registry.SetLimits(registry.Limits{
		MaxServers:    next.Registry.MaxServers,
		MaxNames:      next.Registry.MaxNames,
		UnverifiedTTL: next.Snapshot.UnverifiedWindow,
		FieldNames:    next.Registry.FieldNames,
		MaxNameBytes:  next.Search.MaxNameBytes,
	})
	d.Resolver.SetPolicy(resolverPolicy(next))
	d.Tracker.SetTimings(beacon.Timings{Expiry: next.Beacon.Expiry, CheckInterval: next.Beacon.CheckInterval,
		Limit: next.Registry.MaxServers})
	d.Prober.SetTimings(probe.Timings{
		Concurrency:        next.Probe.Concurrency,
		PerHostConcurrency: next.Probe.PerHostConcurrency,
		EchoInterval:       next.Probe.EchoInterval,
		ProbeTimeout:       next.Probe.Timeout,
		FirstTimeout:       next.Probe.FirstTimeout,
		ThroughRetries:     next.Probe.ThroughRetries,
		MaxThrough:         next.Probe.ThroughMax,
		Reprobe:            next.Probe.ReprobeInterval,
		Backoff:            probeBackoff(next),
	})
	d.TCP.SetPolicy(tcpPolicy(next))
	udp := udpPolicy(next)
	udp.LearnFrom = learnFrom(d.boot.PVA.Interfaces, next.UDP.LearnInterfaces)
	d.UDP.SetPolicy(d.withAnomalies(udp))
	d.DNS.SetLimits(dnsLimits(next))
	d.DNS.SetNames(next.HostNames())
	d.Relay.SetLimits(d.relayLimits(next))
	d.Upstream.SetServers(d.nameServers(next), upstreamConnOptions(next))
	d.httpSrv.SetLimits(httpLimits(next))
	d.Ring.SetLimits(next.Search.ThroughMaxNames, next.Search.ThroughDatagramsPerSecond)
	if prev == nil || prev.Search.Through != next.Search.Through {
		if next.Search.Through {
			d.Resolver.SetSearcher(ringSearcher{d.Ring})
		} else {
			d.Resolver.SetSearcher(nil)
		}
	}
	if prev == nil {
		d.nameFiles.Dir = next.Static.NamesDir // scanned from Start
		return
	}

	// Only on reload: parts already running.
	if !slices.Equal(prev.Access.ServerAllow, next.Access.ServerAllow) {
		d.dropDeniedServers(&next.Access, "server outside the new access.server_allow: dropped")
	}
	if !slices.Equal(prev.Static.Servers, next.Static.Servers) || !slices.Equal(prev.Access.ServerAllow, next.Access.ServerAllow) {
		d.Prober.SetStatic(d.allowedStatic(d.staticServers(next)))
		d.forgetUnlisted(d.staticServers(prev), d.staticServers(next))
	}
	d.openRelay(next)
	if prev.Discovery.Interval != next.Discovery.Interval {
		d.armDiscovery()
	}
	if next.DNS.Refresh > 0 && (prev.DNS.Refresh != next.DNS.Refresh || !slices.Equal(prev.HostNames(), next.HostNames())) {
		d.DNS.Refresh() // new names resolved now, the new refresh from then on
	}
	if prev.Static.NamesDir != next.Static.NamesDir {
		d.nameFiles.SetDir(next.Static.NamesDir)
	}
	if prev.UDP.ReceiveBufferBytes != next.UDP.ReceiveBufferBytes {
		if err := d.UDP.SetReceiveBuffer(int(next.UDP.ReceiveBufferBytes)); err != nil {
			d.log.Warn("UDP receive buffer not changed", zap.Error(err))
		}
	}
	if prev.Snapshot.Interval != next.Snapshot.Interval {
		d.armSnapshot()
	}
	d.setDestinations(next, discoverReload)
	if prev.UDP.SendBeacons != next.UDP.SendBeacons {
		if err := d.UDP.SetSendBeacons(next.UDP.SendBeacons); err != nil {
			d.log.Warn("beacons not switched", zap.Error(err))
		}
	}
}

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
	var auto []netip.AddrPort
	if cfg.PVA.AutoAddrList || (cfg.UDP.SendBeacons && cfg.PVA.AutoBeaconAddrList) {
		var err error
		if auto, err = udpsearch.AutoAddrList(d.boot.PVA.BroadcastPort); err != nil {
			d.log.Warn("cannot read interface broadcast addresses for the auto address lists", zap.Error(err))
		}
	}
	addrList = endpoints(d.expand(cfg.PVA.AddrList))
	if cfg.PVA.AutoAddrList {
		addrList = append(addrList, udpsearch.Unicast(auto...)...)
	}
	beaconList = endpoints(cfg.PVA.BeaconAddrList)
	if cfg.UDP.SendBeacons && cfg.PVA.AutoBeaconAddrList {
		beaconList = append(beaconList, udpsearch.Unicast(auto...)...)
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

func httpLimits(c *config.Config) httpapi.Limits {
	return httpapi.Limits{
		MaxConns:          c.HTTP.MaxConnections,
		MaxConnsPerSource: c.HTTP.MaxConnectionsPerSource,
		DiscoverInterval:  c.HTTP.DiscoverInterval,
	}
}

func resolverPolicy(c *config.Config) resolver.Policy {
	return resolver.Policy{
		MaxWaitsPerClient: c.TCP.WaitersPerConnection,
		MaxWaitsPerSource: c.TCP.WaitersPerSource,
		MaxWaiters:        c.TCP.WaitersTotal,
		MaxNameBytes:      c.Search.MaxNameBytes,
		NameAllowed:       nameFilter(&c.Access),
	}
}

func tcpPolicy(c *config.Config) tcpsearch.Policy {
	return tcpsearch.Policy{
		ClientAllowed:     tcpClientFilter(&c.Access),
		ClientCertAllowed: tcpCertFilter(&c.Access),
		MaxConns:          c.TCP.MaxConnections,
		MaxConnsPerSource: c.TCP.MaxConnectionsPerSource, // one address cannot fill MaxConns
		Conn:              clientConnOptions(c),
		MessageRate:       c.RateLimit.TCPMessagesPerSecond,
		MessageBurst:      c.RateLimit.TCPMessageBurst,
		RateExempt:        c.RateLimit.Exempt,
		AddressMap:        c.Map.Rules,
		BufferBytesTotal:  c.TCP.BufferBytesTotal,
	}
}

func udpPolicy(c *config.Config) udpsearch.Policy {
	return udpsearch.Policy{
		ClientAllowed:    udpClientFilter(&c.Access),
		IgnoreAddrs:      c.PVA.IgnoreAddrList,
		AnswerNames:      c.UDP.AnswerSearches && !c.Relay.Only, // a relay has no name server to answer for
		Silent:           c.Relay.Only,
		SearchRate:       c.RateLimit.UDPSearchesPerSecond,
		SearchBurst:      c.RateLimit.UDPSearchBurst,
		NameRate:         c.RateLimit.UDPNamesPerSecond,
		NameBurst:        c.RateLimit.UDPNameBurst,
		ReflectionRatio:  c.RateLimit.ReflectionRatio,
		ReflectionWindow: c.RateLimit.ReflectionWindow,
		LimitExempt:      c.RateLimit.Exempt,
		AddressMap:       c.Map.Rules,
		ServerAllowed:    serverFilter(&c.Access),
		TrustedRelays:    c.Access.TrustedRelays,
		BeaconRate:       c.RateLimit.BeaconsPerSecond,
		BeaconBurst:      c.RateLimit.BeaconBurst,
	}
}

// learnFrom is where the UDP participant takes hints from: the interfaces
// pvans serves (served, the running pva.interfaces) and those of widen
// (udp.learn_interfaces); nil, every interface, when either has a
// wildcard.
func learnFrom(served, widen []netip.Addr) []netip.Addr {
	all := append(slices.Clone(served), widen...)
	if slices.ContainsFunc(all, netip.Addr.IsUnspecified) {
		return nil
	}
	return all
}

// connOptions turns a config connection profile into connection options.
func connOptions(p config.ConnProfile) pvaconn.Options {
	return pvaconn.Options{MaxMessage: int(p.MaxMessageBytes), SendQueueBytes: int(p.SendQueueBytes),
		HandshakeTimeout: p.HandshakeTimeout, MessageTimeout: p.MessageTimeout}
}

// clientConnOptions: the clients profile, closed after tcp.idle_timeout of
// silence (clients echo; the listener does not).
func clientConnOptions(cfg *config.Config) pvaconn.Options {
	o := connOptions(cfg.ClientConn())
	o.IdleTimeout = cfg.TCP.IdleTimeout
	return o
}

// upstreamConnOptions: the probes profile with PVXS's client timers, as a
// PVXS client keeps its name-server connections.
func upstreamConnOptions(cfg *config.Config) pvaconn.Options {
	o := connOptions(cfg.Probe.Conn)
	o.IdleTimeout, o.EchoInterval = cfg.PVA.TCPTimeout(), cfg.PVA.EchoInterval()
	return o
}

// probeBackoff: the bounds are settings, the shape (doubling, ±20 %) is
// the prober's.
func probeBackoff(cfg *config.Config) probe.Backoff {
	b := probe.DefaultBackoff
	b.Min, b.Max = cfg.Probe.BackoffMin, cfg.Probe.BackoffMax
	return b
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
