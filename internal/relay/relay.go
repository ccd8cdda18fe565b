// Package relay sends the server sightings a pvans accepted (beacons and
// discovery replies heard on its own networks) on to central pvans
// instances, so servers on a subnet the central ones cannot hear (across
// a router, which forwards no broadcasts) are still announced to them.
//
// Each sighting goes out as the datagram it came as — a CMD_BEACON, or a
// CMD_SEARCH_RESPONSE for a discovery reply — with the server address
// written out: the endpoint the sighting named, a wildcard already
// replaced by the sender's address. The central side takes it only from
// a sender in its access.trusted_relays, and only as a hint: it lists the
// server over TCP before a name moves (docs/SECURITY.md, "Trust").
//
// It owns its own UDP sockets (an ephemeral port; the central side checks
// the sender's address, not its port) and a global rate bound. It decides
// nothing about what was accepted: the daemon hands it what passed the
// hint rules.
//
// # Re-announcing
//
// A central instance started without a snapshot would otherwise learn a
// routed site's servers only as each beacons again (up to 180 s apart, or
// a relay's discovery.interval). So the relay also keeps the servers it
// heard first hand (one entry per server address, forgotten after
// beacon.expiry unheard, at most registry.max_servers), and when a
// relay.to destination sends it a discovery ping (a central pings its
// access.trusted_relays at start and at each discovery round) it sends
// that destination, and no other, every one of them again, under the
// same rate bound. A ping from any other address re-announces nothing:
// a relay never sends its table where its configuration does not.
package relay

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/ratelimit"
)

// Options configure a Relay.
type Options struct {
	Clock  clock.Clock
	Logger *zap.Logger
	// Broadcast reports whether a is a broadcast address of this host's
	// networks (a directed broadcast); nil: none is known.
	Broadcast func(a netip.Addr) bool
}

// Limits are the reloadable settings.
// Each tag names the setting the field takes (config.Fill).
type Limits struct {
	// To are the central instances' search ports; empty: nothing is sent.
	To []netip.AddrPort
	// ToBroadcast lets To name multicast and broadcast destinations;
	// without it they are skipped (config refuses them as written; a host
	// name can still resolve to one, and a directed broadcast is known
	// only here).
	ToBroadcast bool `setting:"relay.to_broadcast"`
	// PerSecond and Burst bound the sightings relayed (each to every
	// destination); PerSecond 0: no bound.
	PerSecond float64
	Burst     int
	// Expiry is how long a server heard first hand is kept for a
	// re-announce after it was last heard: as long as a tracker keeps it.
	// 0: kept until pushed out.
	Expiry time.Duration `setting:"beacon.expiry"`
	// Known bounds the servers kept for a re-announce (the oldest heard
	// goes first); 0: none are kept.
	Known int `setting:"registry.max_servers"`
}

// ReannounceGap is the least time between two re-announces to one
// destination: a central pings at start and at each discovery round, so
// one re-announce per ping; a burst of pings (or forged ones from the
// destination's address) costs at most one table every ReannounceGap.
const ReannounceGap = 10 * time.Second

// heard is one server heard first hand, kept for a re-announce.
type heard struct {
	o  beacon.Observation
	at time.Time
}

// reannounce is one destination's re-announce: the sightings still to
// send and when it started.
type reannounce struct {
	queue   []beacon.Observation
	started time.Time
	timer   clock.Timer
}

// Relay forwards sightings. Safe for concurrent use.
type Relay struct {
	o Options

	mu    sync.Mutex
	to    []netip.AddrPort
	lim   Limits
	limit *ratelimit.Limiter // nil: no bound
	c4    *net.UDPConn
	c6    *net.UDPConn
	buf   []byte
	known map[netip.AddrPort]heard // by server endpoint
	re    map[netip.AddrPort]*reannounce

	counters // metrics.go
}

// New returns a relay with no destinations and no sockets.
func New(o Options) *Relay {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return &Relay{o: o, buf: make([]byte, 0, 256), known: map[netip.AddrPort]heard{}, re: map[netip.AddrPort]*reannounce{}}
}

// Apply replaces the destinations and the rate bound (a changed rate
// starts with a full burst).
func (r *Relay) Apply(l Limits) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.limit == nil || l.PerSecond != r.lim.PerSecond || l.Burst != r.lim.Burst {
		r.limit = ratelimit.New(ratelimit.Options{Rate: l.PerSecond, Burst: l.Burst, Sources: 1, Clock: r.o.Clock})
	}
	r.lim = l
	r.to = r.to[:0:0]
	for _, to := range l.To {
		if !l.ToBroadcast && r.broadcast(to.Addr()) {
			r.o.Logger.Warn("relay.to destination is multicast or broadcast: skipped (relay.to_broadcast allows it)", zap.Stringer("to", to))
			continue
		}
		r.to = append(r.to, to)
	}
	for to, ra := range r.re {
		if !r.isTo(to) {
			r.stop(to, ra) // no longer a destination: nothing more goes there
		}
	}
	if l.Known <= 0 {
		clear(r.known)
	}
	for len(r.known) > l.Known {
		r.evictOldest()
	}
}

// broadcast reports whether a reaches a group of hosts: multicast, the
// limited broadcast, or a broadcast address of this host's networks.
func (r *Relay) broadcast(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || (r.o.Broadcast != nil && r.o.Broadcast(a))
}

// Open opens the sending sockets: IPv4, and IPv6 where the host has it.
func (r *Relay) Open() error {
	c4, err := net.ListenUDP("udp4", &net.UDPAddr{})
	if err != nil {
		return err
	}
	c6, err := net.ListenUDP("udp6", &net.UDPAddr{})
	if err != nil {
		c6 = nil // no IPv6 on this host: IPv6 destinations fail, counted
	}
	r.mu.Lock()
	r.c4, r.c6 = c4, c6
	r.mu.Unlock()
	return nil
}

// Close closes the sockets.
func (r *Relay) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c4 != nil {
		_ = r.c4.Close()
	}
	if r.c6 != nil {
		_ = r.c6.Close()
	}
	r.c4, r.c6 = nil, nil
	for to, ra := range r.re {
		r.stop(to, ra)
	}
}

// everyone is the one key of the global rate bound.
var everyone = netip.IPv4Unspecified()

// Relayable reports whether a relay may name a: a unicast address of a
// host reachable from other networks (not loopback, multicast, limited
// broadcast, link-local or unspecified). The receiving side applies it to
// relayed hints, and also refuses its own addresses (udpsearch).
func Relayable(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsValid() && !a.IsLoopback() && !a.IsMulticast() && !a.IsUnspecified() && !a.IsLinkLocalUnicast() &&
		a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// FirstHand reports whether o was heard from the server it names: the
// datagram came from the server's own address. A sighting another relay
// sent comes from the relay and names another host (udpsearch takes that
// only from access.trusted_relays).
func FirstHand(o beacon.Observation) bool {
	return o.From.Addr().Unmap() == o.Endpoint.Addr().Unmap()
}

// Relay sends one accepted sighting to every destination, unless the rate
// bound is spent, the sighting names an address a relay may not name
// (an IOC on this host beaconing over loopback: the central side could
// not reach it there), or it was not heard first hand: what a relay was
// relayed goes no further, or two instances relaying to each other would
// pass one beacon back and forth until their rate bounds stopped it.
// Sightings of other pvans instances are not relayed: they are not
// servers.
func (r *Relay) Relay(o beacon.Observation) {
	if o.GUID.IsPvans() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.to) == 0 || r.c4 == nil {
		return
	}
	if !FirstHand(o) {
		r.secondHand.Add(1)
		return
	}
	if !Relayable(o.Endpoint.Addr()) {
		r.notRelayable.Add(1)
		return
	}
	r.remember(o)
	if !r.limit.Allow(everyone) {
		r.rate.Add(1)
		return
	}
	r.buf = Encode(r.buf[:0], o)
	for _, to := range r.to {
		r.send(to)
	}
	r.sightings.Add(1)
}

// send sends r.buf to one destination. r.mu is held.
func (r *Relay) send(to netip.AddrPort) {
	c := r.c4
	if !to.Addr().Unmap().Is4() {
		c = r.c6
	}
	if c == nil {
		r.sendErrors.Add(1)
		return
	}
	if _, err := c.WriteToUDPAddrPort(r.buf, netip.AddrPortFrom(to.Addr().Unmap(), to.Port())); err != nil {
		r.sendErrors.Add(1)
		if ce := r.o.Logger.Check(zap.DebugLevel, "relay send failed"); ce != nil {
			ce.Write(zap.Stringer("to", to), zap.Error(err))
		}
		return
	}
	r.datagrams.Add(1)
}

// remember keeps o, heard first hand, for a re-announce: the latest
// sighting of each server address. r.mu is held.
func (r *Relay) remember(o beacon.Observation) {
	if r.lim.Known <= 0 {
		return
	}
	if _, ok := r.known[o.Endpoint]; !ok && len(r.known) >= r.lim.Known {
		r.evictOldest()
	}
	r.known[o.Endpoint] = heard{o: o, at: r.o.Clock.Now()}
}

// evictOldest drops the server heard longest ago. A scan: it runs only
// when the table is full, and sightings arrive under udp's beacon bound.
func (r *Relay) evictOldest() {
	var oldest netip.AddrPort
	var at time.Time
	for ep, h := range r.known {
		if !oldest.IsValid() || h.at.Before(at) {
			oldest, at = ep, h.at
		}
	}
	delete(r.known, oldest)
	r.knownEvictions.Add(1)
}

// Pinged is told of a discovery ping (a search with no names) from
// from. When from's address is a relay.to destination's, every server
// kept is sent to that destination again (paced by the rate bound),
// unless one was sent there less than ReannounceGap ago. From any other
// address it does nothing: the ping's source could be anyone's.
func (r *Relay) Pinged(from netip.AddrPort) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := from.Addr().Unmap()
	var dests []netip.AddrPort
	for _, to := range r.to {
		if to.Addr().Unmap() == a {
			dests = append(dests, to)
		}
	}
	if len(r.to) == 0 || r.c4 == nil {
		return // not relaying: every ping is a client's
	}
	if len(dests) == 0 {
		r.pingsNotRelayTo.Add(1)
		return
	}
	now := r.o.Clock.Now()
	for _, to := range dests {
		if ra := r.re[to]; ra != nil && (len(ra.queue) > 0 || now.Sub(ra.started) < ReannounceGap) {
			r.pingsTooSoon.Add(1)
			continue
		}
		ra := &reannounce{started: now}
		for ep, h := range r.known {
			if r.lim.Expiry > 0 && now.Sub(h.at) >= r.lim.Expiry {
				delete(r.known, ep) // not heard for as long as a tracker keeps a server
				continue
			}
			ra.queue = append(ra.queue, h.o)
		}
		r.re[to] = ra
		r.reannounces.Add(1)
		r.o.Logger.Info("re-announcing the servers heard here", zap.Stringer("to", to), zap.Int("servers", len(ra.queue)))
		r.drain(to, ra)
	}
}

// drain sends ra's queue to to while the rate bound allows, and comes
// back when it next will. r.mu is held.
func (r *Relay) drain(to netip.AddrPort, ra *reannounce) {
	ra.timer = nil
	for len(ra.queue) > 0 {
		if !r.limit.Allow(everyone) {
			wait := time.Second
			if r.lim.PerSecond > 0 {
				wait = max(time.Duration(float64(time.Second)/r.lim.PerSecond), time.Millisecond)
			}
			ra.timer = r.o.Clock.AfterFunc(wait, func() {
				r.mu.Lock()
				defer r.mu.Unlock()
				if r.re[to] == ra && r.c4 != nil {
					r.drain(to, ra)
				}
			})
			return
		}
		o := ra.queue[0]
		ra.queue[0] = beacon.Observation{}
		ra.queue = ra.queue[1:]
		r.buf = Encode(r.buf[:0], o)
		r.send(to)
		r.reannounced.Add(1)
	}
	ra.queue = nil
}

// isTo reports whether to is a destination now. r.mu is held.
func (r *Relay) isTo(to netip.AddrPort) bool {
	for _, t := range r.to {
		if t == to {
			return true
		}
	}
	return false
}

// stop ends a re-announce. r.mu is held.
func (r *Relay) stop(to netip.AddrPort, ra *reannounce) {
	if ra.timer != nil {
		ra.timer.Stop()
	}
	delete(r.re, to)
}

// Encode appends the datagram that relays o: a beacon, or for a discovery
// reply a search response (not found, no CIDs), naming o's endpoint.
func Encode(dst []byte, o beacon.Observation) []byte {
	addr := pva.AddressFrom(o.Endpoint.Addr().Unmap())
	if o.Via == beacon.ViaDiscovery {
		return pva.AppendSearchResponse(dst, pva.FlagBigEndian|pva.FlagServer, &pva.SearchResponse{
			GUID: o.GUID, Addr: addr, Port: o.Endpoint.Port(), Protocol: []byte(o.Protocol)})
	}
	return pva.AppendBeacon(dst, pva.FlagBigEndian|pva.FlagServer, &pva.Beacon{
		GUID: o.GUID, ChangeCount: o.ChangeCount, Addr: addr, Port: o.Endpoint.Port(), Protocol: o.Protocol})
}

// Known is the number of servers kept for a re-announce now.
func (r *Relay) Known() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.known)
}
