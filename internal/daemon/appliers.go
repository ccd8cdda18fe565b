package daemon

import (
	"net/netip"
	"slices"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/dnswatch"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/relay"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/tcpsearch"
	"github.com/pvans-project/pvans/internal/udpsearch"
	"github.com/pvans-project/pvans/internal/upstream"
)

// This file is where settings reach the parts: one applier per part,
// named by the parts in the settings' rows (config.AppliedBy). New calls
// every applier (prev nil) once every part is built; Reload calls the
// appliers of the parts a changed setting names. So a setting is applied
// the same way at start and on reload.
//
// A part takes its reloadable settings as one value (a Policy, Limits,
// Timings or Settings) through its one verb, Apply, and loads it
// atomically, so one search, datagram, probe or accept sees the old value
// or the new one, never a mix. The value's fields name the setting they
// take in a `setting` tag, and config.Fill copies them from the
// configuration: a new setting for a part is its row, its Config field and
// the tagged field the part reads, and nothing here. An applier computes
// only what is not one setting's value (access filters, expanded host
// names, connection options).

// applier applies its part's settings. prev is the configuration in force
// before (nil in New, before anything started); the parts that act on a
// running daemon (sockets, timers, the registry's contents) do nothing in
// New, where the builder gave them their settings.
type applier struct {
	part  config.Part
	apply func(d *Daemon, prev, next *config.Config) // nil: applied outside the daemon
	// every: called on every reload, changed or not, because it reads
	// again what lies outside the configuration (the interface table, the
	// keychain file).
	every bool
}

// appliers in the order they run: the parts' values first, then what acts
// on the running daemon.
var appliers = []applier{
	{part: "registry", apply: (*Daemon).applyRegistry},
	{part: "resolver", apply: (*Daemon).applyResolver},
	{part: "beacon", apply: (*Daemon).applyBeacon},
	{part: "probe", apply: (*Daemon).applyProbe},
	{part: "tcp", apply: (*Daemon).applyTCP},
	{part: "udp", apply: (*Daemon).applyUDP},
	{part: "dns", apply: (*Daemon).applyDNS},
	{part: "relay", apply: (*Daemon).applyRelay},
	{part: "upstream", apply: (*Daemon).applyUpstream},
	{part: "http", apply: (*Daemon).applyHTTP},
	{part: "search", apply: (*Daemon).applySearch},
	{part: "names", apply: (*Daemon).applyNames},
	{part: "denied", apply: (*Daemon).applyDenied},
	{part: "static", apply: (*Daemon).applyStatic},
	{part: "discovery", apply: (*Daemon).applyDiscovery},
	{part: "udp_buffer", apply: (*Daemon).applyUDPBuffer},
	{part: "snapshot", apply: (*Daemon).applySnapshot},
	{part: "destinations", apply: (*Daemon).applyDestinations, every: true},
	{part: "beacons", apply: (*Daemon).applyBeacons},
	{part: "keychain", apply: (*Daemon).applyKeychain, every: true},
	// cmd/pvans switches its logger before it calls Reload.
	{part: "log"},
}

// apply runs the appliers: in New (prev nil) every one, on reload those
// of the parts the changed settings name and those that run every time.
func (d *Daemon) apply(prev, next *config.Config, changed []string) {
	due := map[config.Part]bool{}
	for _, k := range changed {
		parts, _ := config.AppliedBy(k)
		for _, p := range parts {
			due[p] = true
		}
	}
	d.refreshLists(next)
	for _, a := range appliers {
		if a.apply != nil && (prev == nil || a.every || due[a.part]) {
			a.apply(d, prev, next)
		}
	}
}

func (d *Daemon) applyRegistry(_, next *config.Config) {
	l := registry.Limits{MaxNameBytes: registry.MaxNameBytes, FieldNames: registry.FieldNames}
	config.Fill("registry", &l, next)
	d.Registry.Apply(l)
}

func (d *Daemon) applyResolver(_, next *config.Config) {
	p := resolver.Policy{NameAllowed: nameFilter(&next.Access),
		MaxWaitsPerClient: resolver.DefaultMaxWaitsPerClient, MaxWaitsPerSource: d.bounds.WaitersPerSource,
		MaxNameBytes: registry.MaxNameBytes}
	config.Fill("resolver", &p, next)
	d.Resolver.Apply(p)
}

func (d *Daemon) applyBeacon(_, next *config.Config) {
	t := beacon.Timings{CheckInterval: beacon.CheckEvery(next.Beacon.Expiry)}
	config.Fill("beacon", &t, next)
	d.Tracker.Apply(t)
}

func (d *Daemon) applyProbe(_, next *config.Config) {
	t := probe.Timings{Backoff: d.probeBackoff(), Concurrency: probe.DefaultConcurrency,
		PerHostConcurrency: probe.DefaultPerHostConcurrency, EchoInterval: d.bounds.probeEcho(next),
		ProbeTimeout: probe.DefaultTimeout, FirstTimeout: probe.DefaultFirstTimeout, Reprobe: probe.DefaultReprobeInterval,
		ThroughRetries: probe.DefaultThroughRetries, MaxThrough: probe.DefaultMaxThrough}
	config.Fill("probe", &t, next)
	d.Prober.Apply(t)
}

func (d *Daemon) applyTCP(_, next *config.Config) {
	p := tcpsearch.Policy{
		ClientAllowed:     tcpClientFilter(&next.Access),
		ClientCertAllowed: tcpCertFilter(&next.Access),
		Conn:              clientConnOptions(next),
		MaxConnsPerSource: tcpsearch.DefaultMaxConnsPerSource,
		BufferBytesTotal:  tcpsearch.DefaultBufferBytesTotal,
	}
	config.Fill("tcp", &p, next)
	p.MessageBurst = burst(p.MessageRate, tcpsearch.BurstSeconds)
	d.TCP.Apply(p)
}

func (d *Daemon) applyUDP(_, next *config.Config) {
	p := udpsearch.Policy{
		ClientAllowed: udpClientFilter(&next.Access),
		// The relay profile (restart-only) has no name server to answer for.
		AnswerNames:   next.UDP.AnswerSearches && !d.boot.Relay.Only,
		Silent:        d.boot.Relay.Only,
		ServerAllowed: serverFilter(&next.Access),
		LearnFrom:     learnFrom(d.boot.PVA.Interfaces, next.UDP.LearnInterfaces),
		// A spoofed search is never amplified beyond the ratio.
		ReflectionRatio: d.bounds.ReflectionRatio, ReflectionWindow: d.bounds.ReflectionWindow,
	}
	config.Fill("udp", &p, next)
	p.SearchBurst = burst(p.SearchRate, udpsearch.BurstSeconds)
	p.NameBurst = burst(p.NameRate, udpsearch.BurstSeconds)
	p.BeaconBurst = burst(p.BeaconRate, udpsearch.BurstSeconds)
	d.UDP.Apply(d.withAnomalies(p))
}

// applyDNS also starts a round at once when the refresh or the names
// changed, so new names resolve now and the new refresh holds from then on.
func (d *Daemon) applyDNS(prev, next *config.Config) {
	s := dnswatch.Settings{Names: next.HostNames(), Timeout: dnswatch.DefaultTimeout, Concurrency: dnswatch.DefaultConcurrency,
		MaxNames: dnswatch.DefaultMaxNames, MaxAddresses: dnswatch.DefaultMaxAddresses}
	config.Fill("dns", &s, next)
	d.DNS.Apply(s)
	if prev != nil && s.Refresh > 0 && (prev.DNS.Refresh != s.Refresh || !slices.Equal(prev.HostNames(), s.Names)) {
		d.DNS.Refresh()
	}
}

// applyRelay: relay.to's host names expanded; the sockets are opened the
// first time there is somewhere to relay to (Start opens them at start).
func (d *Daemon) applyRelay(prev, next *config.Config) {
	l := relay.Limits{To: config.AddrPorts(d.expand(next.Relay.To)), PerSecond: d.bounds.RelayPerSecond}
	config.Fill("relay", &l, next)
	l.Burst = burst(l.PerSecond, relay.BurstSeconds)
	d.Relay.Apply(l)
	if prev != nil {
		d.openRelay(next)
	}
}

func (d *Daemon) applyUpstream(_, next *config.Config) {
	d.Upstream.Apply(upstream.Settings{Servers: d.nameServers(next), Conn: upstreamConnOptions(next)})
}

func (d *Daemon) applyHTTP(_, next *config.Config) { d.httpSrv.Apply(d.httpLimits(next)) }

// applySearch hands the waited names to the search ring (search.through)
// or takes them back.
func (d *Daemon) applySearch(_, next *config.Config) {
	if next.Search.Through {
		d.Resolver.SetSearcher(ringSearcher{d.Ring})
	} else {
		d.Resolver.SetSearcher(nil)
	}
}

// applyNames: the static name files' directory, scanned from Start, or on
// reload at once (the old directory's servers lost).
func (d *Daemon) applyNames(prev, next *config.Config) {
	if prev == nil {
		d.nameFiles.Dir = next.Static.NamesDir
		return
	}
	d.nameFiles.SetDir(next.Static.NamesDir)
}

// applyDenied drops the servers a narrowed access.server_allow no longer
// admits (Start drops those of the snapshot).
func (d *Daemon) applyDenied(prev, next *config.Config) {
	if prev != nil {
		d.dropDeniedServers(&next.Access, "server outside the new access.server_allow: dropped")
	}
}

// applyStatic gives the prober the static servers the server allow list
// admits (Start gives the first ones) and forgets those taken off the
// list that nothing else announces.
func (d *Daemon) applyStatic(prev, next *config.Config) {
	if prev == nil {
		return
	}
	d.Prober.SetStatic(d.allowedStatic(d.staticServers(next)))
	d.forgetUnlisted(d.staticServers(prev), d.staticServers(next))
}

// applyDiscovery re-arms the periodic discovery ping (Start arms it).
func (d *Daemon) applyDiscovery(prev, _ *config.Config) {
	if prev != nil {
		d.armDiscovery()
	}
}

// applyUDPBuffer sets the open UDP sockets' receive buffer (New gives the
// UDP side the first one).
func (d *Daemon) applyUDPBuffer(prev, next *config.Config) {
	if prev == nil {
		return
	}
	if err := d.UDP.SetReceiveBuffer(int(next.UDP.ReceiveBufferBytes)); err != nil {
		d.log.Warn("UDP receive buffer not changed", zap.Error(err))
	}
}

// applySnapshot re-arms the periodic snapshot save (Start arms it).
func (d *Daemon) applySnapshot(prev, _ *config.Config) {
	if prev != nil {
		d.armSnapshot()
	}
}

// applyDestinations hands the UDP side its search and beacon destinations
// (New gives it the first ones), with the interface table read again.
func (d *Daemon) applyDestinations(prev, next *config.Config) {
	if prev != nil {
		d.setDestinations(next, discoverReload)
	}
}

// applyBeacons switches pvans's own beacons on or off (New gives the UDP
// side the first choice).
func (d *Daemon) applyBeacons(prev, next *config.Config) {
	if prev == nil {
		return
	}
	if err := d.UDP.SetSendBeacons(next.UDP.SendBeacons); err != nil {
		d.log.Warn("beacons not switched", zap.Error(err))
	}
}

// applyKeychain reads the keychain again (New loaded the first one).
func (d *Daemon) applyKeychain(prev, next *config.Config) {
	if prev != nil {
		d.reloadKeychain(next)
	}
}

func (d *Daemon) httpLimits(c *config.Config) httpapi.Limits {
	l := httpapi.Limits{MaxConns: httpapi.DefaultMaxConns, MaxConnsPerSource: httpapi.DefaultMaxConnsPerSource,
		ShowDownFor: httpapi.DefaultShowDownFor, DiscoverInterval: d.bounds.DiscoverInterval}
	config.Fill("http", &l, c)
	return l
}

// learnFrom is where the UDP participant takes hints from: the interfaces
// of learn (udp.learn_interfaces) when it is set, else those pvans serves
// (served, the running pva.interfaces); nil, every interface, when the
// list in force has a wildcard. Learning apart from serving is what a
// gateway host needs: clients served on one leg, servers learned only on
// the other.
func learnFrom(served, learn []netip.Addr) []netip.Addr {
	l := served
	if len(learn) > 0 {
		l = learn
	}
	if slices.ContainsFunc(l, netip.Addr.IsUnspecified) {
		return nil
	}
	return slices.Clone(l)
}

// connOptions turns a config connection profile into connection options.
func connOptions(p config.ConnProfile) pvaconn.Options {
	return pvaconn.Options{MaxMessage: int(p.MaxMessageBytes), SendQueueBytes: int(p.SendQueueBytes),
		HandshakeTimeout: p.HandshakeTimeout, MessageTimeout: p.MessageTimeout}
}

// clientConnOptions: the clients profile (tcpsearch's bounds), closed
// after PVXS's tcpTimeout of pva.conn_tmo of silence (clients echo; the
// listener does not).
func clientConnOptions(cfg *config.Config) pvaconn.Options {
	return pvaconn.Options{MaxMessage: tcpsearch.DefaultMaxMessageBytes, SendQueueBytes: tcpsearch.DefaultSendQueueBytes,
		HandshakeTimeout: tcpsearch.DefaultReadTimeout, MessageTimeout: tcpsearch.DefaultReadTimeout,
		IdleTimeout: cfg.PVA.TCPTimeout(), KeepAlive: pvaconn.NameServerKeepAlive}
}

// burst is a rate limiter's burst: seconds of its rate at once (the
// parts' BurstSeconds), at least one.
func burst(rate float64, seconds int) int {
	return max(1, int(rate*float64(seconds)+0.5))
}

// upstreamConnOptions: the probes profile with PVXS's client timers, as a
// PVXS client keeps its name-server connections.
func upstreamConnOptions(cfg *config.Config) pvaconn.Options {
	o := connOptions(cfg.Probe.Conn)
	o.IdleTimeout, o.EchoInterval = cfg.PVA.TCPTimeout(), cfg.PVA.EchoInterval()
	return o
}

// probeBackoff: the prober's shape (doubling, ±20 %) between its
// constants (a test's first delay through Options.TestBounds).
func (d *Daemon) probeBackoff() probe.Backoff {
	b := probe.BackoffShape
	b.Min, b.Max = d.bounds.ProbeBackoffMin, probe.DefaultBackoffMax
	return b
}
