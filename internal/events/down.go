package events

import (
	"net/netip"
	"slices"
	"sync"
	"time"
)

// MaxDown bounds the servers kept as down: a server is kept only after it
// was listed over TCP (a forged beacon's row never is), and the oldest
// goes first beyond this.
const MaxDown = 4096

// DownServer is a server that was lost and has not come back at its
// endpoint.
type DownServer struct {
	GUID     string
	Endpoint netip.AddrPort
	Since    time.Time // when it was lost
	Reason   string
	Names    int // names it held when lost
	// What the registry's row said when it went.
	Protocol, Discovered string
	FirstSeen, LastSeen  time.Time
}

// Down is the servers lost and not back, one per endpoint, for the
// operator's views: a down row an operator used to a CA gateway's or a
// monitoring system's sees, where the registry has no row any more.
type Down struct {
	mu      sync.Mutex
	byEP    map[netip.AddrPort]DownServer
	evicted uint64 // entries dropped at MaxDown
}

// NewDown returns an empty list.
func NewDown() *Down { return &Down{byEP: map[netip.AddrPort]DownServer{}} }

// Lost records s as down, in place of what its endpoint held before.
func (d *Down) Lost(s DownServer) {
	if len(s.Reason) > MaxDetail {
		s.Reason = s.Reason[:MaxDetail]
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.byEP[s.Endpoint]; !ok && len(d.byEP) >= MaxDown {
		var oldest netip.AddrPort
		first := true
		for ep, x := range d.byEP {
			if first || x.Since.Before(d.byEP[oldest].Since) {
				oldest, first = ep, false
			}
		}
		delete(d.byEP, oldest)
		d.evicted++
	}
	d.byEP[s.Endpoint] = s
}

// Back clears ep: a server is listed there again.
func (d *Down) Back(ep netip.AddrPort) {
	d.mu.Lock()
	delete(d.byEP, ep)
	d.mu.Unlock()
}

// List returns the servers lost within keep before now, newest first, and
// forgets older ones; keep 0 lists none.
func (d *Down) List(now time.Time, keep time.Duration) []DownServer {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []DownServer
	for ep, s := range d.byEP {
		if now.Sub(s.Since) >= keep {
			delete(d.byEP, ep)
			continue
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b DownServer) int { return b.Since.Compare(a.Since) })
	return out
}

// Evicted is how many servers were dropped from the list at MaxDown.
func (d *Down) Evicted() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.evicted
}
