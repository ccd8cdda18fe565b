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
package relay

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

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
	PerSecond float64 `setting:"relay.max_per_second"`
	Burst     int     `setting:"relay.burst"`
}

// Stats are counters for metrics.
type Stats struct {
	Relayed      uint64 // sightings relayed
	Datagrams    uint64 // datagrams sent (a sighting to each destination)
	Rate         uint64 // sightings dropped by the rate bound
	NotRelayable uint64 // sightings naming an address a relay may not name
	SecondHand   uint64 // sightings another relay sent (FirstHand false)
	SendErrors   uint64 // datagrams the kernel refused
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

	relayed, datagrams, rate, notRelayable, secondHand, sendErrors atomic.Uint64
}

// New returns a relay with no destinations and no sockets.
func New(o Options) *Relay {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return &Relay{o: o, buf: make([]byte, 0, 256)}
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
	if !r.limit.Allow(everyone) {
		r.rate.Add(1)
		return
	}
	r.buf = Encode(r.buf[:0], o)
	for _, to := range r.to {
		c := r.c4
		if !to.Addr().Unmap().Is4() {
			c = r.c6
		}
		if c == nil {
			r.sendErrors.Add(1)
			continue
		}
		if _, err := c.WriteToUDPAddrPort(r.buf, netip.AddrPortFrom(to.Addr().Unmap(), to.Port())); err != nil {
			r.sendErrors.Add(1)
			if ce := r.o.Logger.Check(zap.DebugLevel, "relay send failed"); ce != nil {
				ce.Write(zap.Stringer("to", to), zap.Error(err))
			}
			continue
		}
		r.datagrams.Add(1)
	}
	r.relayed.Add(1)
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

// Stats returns the counters.
func (r *Relay) Stats() Stats {
	return Stats{Relayed: r.relayed.Load(), Datagrams: r.datagrams.Load(), Rate: r.rate.Load(),
		NotRelayable: r.notRelayable.Load(), SecondHand: r.secondHand.Load(), SendErrors: r.sendErrors.Load()}
}
