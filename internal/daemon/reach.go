package daemon

import (
	"net/netip"
	"slices"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/metrics"
)

// Reaching servers on other networks (docs/operations.md, "Reaching IOCs
// on other networks"): periodic discovery pings, host names in the
// address lists followed in DNS, and relaying sightings to central
// instances.

// Discovery triggers, the label of pvans_discovery_rounds_total.
const (
	discoverStart    = "start"
	discoverPeriodic = "periodic"
	discoverReload   = "reload"
	discoverDNS      = "dns"
	discoverOperator = "operator"
)

// discoveryRounds counts discovery pings sent to every destination, by
// trigger.
type discoveryRounds map[string]*metrics.Counter

func newDiscoveryRounds(c *counters) discoveryRounds {
	return discoveryRounds{discoverStart: &c.roundsStart, discoverPeriodic: &c.roundsPeriodic,
		discoverReload: &c.roundsReload, discoverDNS: &c.roundsDNS, discoverOperator: &c.roundsOperator}
}

// discover sends one discovery ping to every search destination and
// counts the round under trigger.
func (d *Daemon) discover(trigger string) error {
	d.discoveries[trigger].Add(1)
	// Periodic rounds are counted, not listed: at a short interval they
	// would push everything else out of the bounded event list.
	if trigger != discoverPeriodic {
		d.Events.Add(events.Event{At: d.clk.Now(), Kind: "discovery", Detail: "discovery ping sent (" + trigger + ")"})
	}
	return d.ping(trigger != discoverPeriodic)
}

// armDiscovery schedules the next periodic discovery ping
// (discovery.interval, read now so a reload applies from the next round);
// none when it is 0.
func (d *Daemon) armDiscovery() {
	iv := d.conf().Discovery.Interval
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.periodicTmr != nil {
		d.periodicTmr.Stop()
		d.periodicTmr = nil
	}
	if !d.closed && d.started && iv > 0 {
		d.periodicTmr = d.clk.AfterFunc(iv, d.periodicDiscover)
	}
}

func (d *Daemon) periodicDiscover() {
	d.mu.Lock()
	n := len(d.addrList)
	d.mu.Unlock()
	if n > 0 {
		if err := d.discover(discoverPeriodic); err != nil {
			d.log.Debug("periodic discovery ping failed", zap.Error(err))
		}
	}
	d.armDiscovery()
}

// expand is a list with every entry written as a host name replaced by
// the addresses DNS gives it now (each with the entry's port, TTL and
// interface); before the name's first lookup, or when it is not
// followed, the address it had at load stays.
func (d *Daemon) expand(l []config.Endpoint) []config.Endpoint {
	out := make([]config.Endpoint, 0, len(l))
	seen := make(map[config.Endpoint]bool, len(l))
	add := func(e config.Endpoint) {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	for _, e := range l {
		addrs, ok := []netip.Addr(nil), false
		if e.Host != "" && d.DNS != nil {
			addrs, ok = d.DNS.Addrs(e.Host)
		}
		if !ok {
			add(e)
			continue
		}
		for _, a := range addrs {
			x := e
			x.AddrPort = netip.AddrPortFrom(a, e.Port())
			add(x)
		}
	}
	return out
}

// followedLists are the TCP endpoint lists as DNS answers them now.
type followedLists struct {
	static, nameServers []netip.AddrPort
}

// refreshLists expands c's static servers and name servers again.
func (d *Daemon) refreshLists(c *config.Config) {
	d.lists.Store(&followedLists{static: d.staticServers(c), nameServers: d.nameServers(c)})
}

// followed is an address list of TCP endpoints (static.servers,
// pva.name_servers) with its host names expanded. entries is the list as
// written (Load sets it); a Config built in code may set only the
// addresses, which are then used as they are.
//
// A DNS answer is no more trusted than a relay's sighting: an address it
// gives that the relay address rule refuses (loopback, multicast,
// broadcast, link-local, unspecified, this host's own; udpsearch's
// Relayable) is not followed, or a re-pointed name would make pvans list
// a loopback-only service and tell remote clients "any", or trust it as
// an upstream name server. The operator's configuration says otherwise
// by the address the name had at load (what check-config showed) or by
// access.server_allow naming the address.
func (d *Daemon) followed(c *config.Config, addrs []netip.AddrPort, entries []config.Endpoint) []netip.AddrPort {
	if len(entries) == 0 || !sameAddrs(addrs, entries) {
		return addrs
	}
	var out []netip.AddrPort
	seen := map[netip.AddrPort]bool{}
	for _, e := range entries {
		for _, x := range d.expand([]config.Endpoint{e}) {
			if x.AddrPort != e.AddrPort && !d.followable(c, x.Addr()) {
				d.log.Warn("host name resolves to an address a relay may not name either: not followed there (access.server_allow naming it allows it)",
					zap.String("host", e.Host), zap.Stringer("address", x.Addr()))
				continue
			}
			if !seen[x.AddrPort] {
				seen[x.AddrPort] = true
				out = append(out, x.AddrPort)
			}
		}
	}
	return out
}

// followable reports whether a DNS answer's address a may be followed:
// the relay address rule admits it, or access.server_allow names it.
func (d *Daemon) followable(c *config.Config, a netip.Addr) bool {
	if d.UDP != nil && d.UDP.Relayable(a) {
		return true
	}
	return len(c.Access.ServerAllow) > 0 && c.Access.ServerAllowed(a)
}

// sameAddrs reports whether entries, merged as the config merges them,
// are addrs: the entries belong to the list.
func sameAddrs(addrs []netip.AddrPort, entries []config.Endpoint) bool {
	var seen []netip.AddrPort
	for _, e := range entries {
		if !slices.Contains(seen, e.AddrPort) {
			seen = append(seen, e.AddrPort)
		}
	}
	return slices.Equal(seen, addrs)
}

// staticServers are static.servers with host names expanded.
func (d *Daemon) staticServers(c *config.Config) []netip.AddrPort {
	return d.followed(c, c.Static.Servers, c.Static.ServerEntries)
}

// nameServers are pva.name_servers with host names expanded.
func (d *Daemon) nameServers(c *config.Config) []netip.AddrPort {
	return d.followed(c, c.PVA.NameServers, c.PVA.NameServerEntries)
}

// onDNSChanged applies new DNS answers to every list that holds a name:
// added static servers are probed, removed ones are left like a static
// server taken off the list (a listed server keeps its names until its
// watch ends); search destinations, name servers and relay destinations
// follow, and new search destinations get a discovery ping.
func (d *Daemon) onDNSChanged() {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	d.mu.Lock()
	up := d.started && !d.closed
	d.mu.Unlock()
	if !up {
		return
	}
	c := d.conf()
	d.refreshLists(c)
	d.Prober.SetStatic(d.allowedStatic(d.staticServers(c)))
	d.applyUpstream(c, c)
	d.applyRelay(c, c) // opens the relay's sockets the first time there is somewhere to relay to
	d.Events.Add(events.Event{At: d.clk.Now(), Kind: "dns", Detail: "host names in the address lists resolve to new addresses"})
	d.setDestinations(c, discoverDNS)
}

// openRelay opens the relay's sockets the first time relay.to is set.
func (d *Daemon) openRelay(c *config.Config) {
	if len(c.Relay.To) == 0 || d.relayOpen.Load() {
		return
	}
	if err := d.Relay.Open(); err != nil {
		d.log.Warn("relay sockets not opened; nothing is relayed", zap.Error(err))
		return
	}
	d.relayOpen.Store(true)
}

// relayed hands an accepted sighting to the relay and reports whether it
// goes no further (the relay profile lists nothing itself).
func (d *Daemon) relayed(o beacon.Observation) bool {
	d.Relay.Relay(o)
	return d.boot.Relay.Only
}

// relayPings are the trusted relays a discovery ping also goes to (at
// pva.broadcast_port, the relay's search port as it is ours): each
// access.trusted_relays entry that is one address, not a group's. A relay
// that hears a ping from one of its relay.to destinations sends it every
// server it heard first hand again (internal/relay, "Re-announcing"), so
// an instance started without a snapshot knows a routed site at once,
// not at each server's next beacon. The relay profile pings none: what it
// is relayed goes no further.
func (d *Daemon) relayPings(c *config.Config) []netip.AddrPort {
	if d.boot.Relay.Only {
		return nil
	}
	var out []netip.AddrPort
	for _, p := range c.Access.TrustedRelays {
		a := p.Addr().Unmap()
		if !p.IsSingleIP() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || (d.UDP != nil && d.UDP.Broadcast(a)) {
			continue
		}
		out = append(out, netip.AddrPortFrom(a, d.boot.PVA.BroadcastPort))
	}
	return out
}

// setDestinations hands c's search and beacon destinations to the UDP
// side and, when the search destinations changed, asks them at once which
// servers they have (a discovery ping counted under trigger) rather than
// waiting for their next beacon.
func (d *Daemon) setDestinations(c *config.Config, trigger string) {
	addrList, beaconList := d.destinations(c)
	relays := d.relayPings(c)
	d.mu.Lock()
	changed := !slices.Equal(d.addrList, addrList) || !slices.Equal(d.relayPing, relays)
	d.addrList, d.relayPing = addrList, relays
	d.mu.Unlock()
	d.UDP.SetDestinations(addrList, beaconList)
	if changed && len(addrList)+len(relays) > 0 {
		if err := d.discover(trigger); err != nil {
			d.log.Warn("discovery ping to new destinations failed", zap.String("trigger", trigger), zap.Error(err))
		}
	}
}
