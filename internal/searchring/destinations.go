package searchring

import (
	"net/netip"
	"sync"
)

// MaxDestinations bounds the destinations counted one by one; datagrams to
// any further destination are counted together, unexported. The
// destinations come from the configuration (search address list, name
// servers), not the network, so the bound is never reached in practice.
const MaxDestinations = 256

// DestinationStats are the ring's counts for one destination.
type DestinationStats struct {
	// UDP: datagrams sent and send errors. Upstream name servers: search
	// messages queued (Sent) and skipped because the connection's transmit
	// backlog exceeded UpstreamBacklogLimit (Skipped).
	Sent, Errors, Skipped uint64
}

type destKey struct {
	ap       netip.AddrPort
	upstream bool
}

// destinations keeps per-destination counts; written from the ring's send
// path (under sendMu), read by scrapes.
type destinations struct {
	mu       sync.Mutex
	m        map[destKey]*DestinationStats
	overflow DestinationStats
}

func (d *destinations) get(k destKey) *DestinationStats {
	if s := d.m[k]; s != nil {
		return s
	}
	if len(d.m) >= MaxDestinations {
		return &d.overflow
	}
	if d.m == nil {
		d.m = make(map[destKey]*DestinationStats)
	}
	s := &DestinationStats{}
	d.m[k] = s
	return s
}

func (d *destinations) udpSent(to netip.AddrPort, err error) {
	d.mu.Lock()
	s := d.get(destKey{ap: to})
	if err != nil {
		s.Errors++
	} else {
		s.Sent++
	}
	d.mu.Unlock()
}

func (d *destinations) upstream(to netip.AddrPort, sent bool) {
	d.mu.Lock()
	s := d.get(destKey{ap: to, upstream: true})
	if sent {
		s.Sent++
	} else {
		s.Skipped++
	}
	d.mu.Unlock()
}

// UDPDestination returns the counts for one UDP search destination (zero
// if nothing was sent there yet).
func (r *Ring) UDPDestination(to netip.AddrPort) DestinationStats {
	return r.dests.read(destKey{ap: to})
}

// UpstreamDestination returns the counts for one upstream name server.
func (r *Ring) UpstreamDestination(to netip.AddrPort) DestinationStats {
	return r.dests.read(destKey{ap: to, upstream: true})
}

func (d *destinations) read(k destKey) DestinationStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.m[k]; s != nil {
		return *s
	}
	return DestinationStats{}
}
