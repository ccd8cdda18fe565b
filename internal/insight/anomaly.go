package insight

import (
	"fmt"
	"net/netip"
	"time"
)

// Beacon anomalies (casw's job for Channel Access): the daemon reports
// what it sees at its hook points, and these decide what is worth an
// event. Each is bounded: at most maxTracked endpoints or senders are
// remembered, and a given one is reported at most once an hour.
const (
	AnomalyGUIDChurn      = "guid_churn"      // GUID changes at one endpoint above insight.DefaultGUIDChangesPerHour
	AnomalyBeaconsStopped = "beacons_stopped" // beacons expired while the TCP watch still answers
	AnomalyNotAllowed     = "not_allowed"     // beacons from a server outside access.server_allow
	maxTracked            = 4096
	anomalyWindow         = time.Hour
)

type anomalyState struct {
	churn    map[netip.AddrPort][]int64 // GUID change times within the window
	reported map[string]int64           // kind+key → last report
	counts   map[string]uint64
}

func (a *anomalyState) init() {
	a.churn = map[netip.AddrPort][]int64{}
	a.reported = map[string]int64{}
	a.counts = map[string]uint64{}
}

// due reports whether key may be reported now (not within the window),
// and remembers it; when the table is full old entries are dropped first.
func (a *anomalyState) due(kind, key string, now int64) bool {
	k := kind + " " + key
	if last, ok := a.reported[k]; ok && now-last < int64(anomalyWindow) {
		return false
	}
	if len(a.reported) >= maxTracked {
		for k2, t := range a.reported {
			if now-t >= int64(anomalyWindow) {
				delete(a.reported, k2)
			}
		}
		if len(a.reported) >= maxTracked {
			return false
		}
	}
	a.reported[k] = now
	a.counts[kind]++
	return true
}

// GUIDChanged notes that a new GUID took over ep (the beacon tracker's
// "changed"). It returns the event detail when the endpoint has now changed
// GUID more than insight.DefaultGUIDChangesPerHour times within an hour.
func (in *Insight) GUIDChanged(ep netip.AddrPort, at time.Time) (string, bool) {
	if in.o.GUIDChangesPerHour <= 0 {
		return "", false
	}
	in.amu.Lock()
	defer in.amu.Unlock()
	now := at.UnixNano()
	ts := in.an.churn[ep]
	keep := ts[:0]
	for _, t := range ts {
		if now-t < int64(anomalyWindow) {
			keep = append(keep, t)
		}
	}
	if len(keep) > in.o.GUIDChangesPerHour+1 {
		keep = keep[len(keep)-in.o.GUIDChangesPerHour-1:] // only the count above the limit matters
	}
	if _, ok := in.an.churn[ep]; !ok && len(in.an.churn) >= maxTracked {
		for e, ts := range in.an.churn {
			if len(ts) == 0 || now-ts[len(ts)-1] >= int64(anomalyWindow) {
				delete(in.an.churn, e)
			}
		}
		if len(in.an.churn) >= maxTracked {
			return "", false
		}
	}
	keep = append(keep, now)
	in.an.churn[ep] = keep
	if len(keep) <= in.o.GUIDChangesPerHour || !in.an.due(AnomalyGUIDChurn, ep.String(), now) {
		return "", false
	}
	return fmt.Sprintf("server GUID changed more than %d times within an hour (restart loop, or two servers on one endpoint)", in.o.GUIDChangesPerHour), true
}

// BeaconsStopped notes that a server's beacons expired while its TCP watch
// connection still answers (a beacon path problem: a firewall, a changed
// EPICS_PVAS_BEACON_ADDR_LIST). It returns the event detail, at most once
// an hour per endpoint.
func (in *Insight) BeaconsStopped(ep netip.AddrPort, at time.Time) (string, bool) {
	in.amu.Lock()
	defer in.amu.Unlock()
	if !in.an.due(AnomalyBeaconsStopped, ep.String(), at.UnixNano()) {
		return "", false
	}
	return "beacons stopped but the server still answers over TCP (check the beacon path: firewall, EPICS_PVAS_BEACON_ADDR_LIST)", true
}

// NotAllowed notes a beacon or discovery reply from (or naming) addr, a
// server outside the server allow list. It returns the event detail, at
// most once an hour per address.
func (in *Insight) NotAllowed(addr netip.Addr, at time.Time) (string, bool) {
	in.amu.Lock()
	defer in.amu.Unlock()
	if !in.an.due(AnomalyNotAllowed, addr.String(), at.UnixNano()) {
		return "", false
	}
	return fmt.Sprintf("beacon or discovery reply from or naming %s, outside access.server_allow: ignored", addr), true
}

func (in *Insight) anomalies(kind string) uint64 {
	in.amu.Lock()
	defer in.amu.Unlock()
	return in.an.counts[kind]
}
