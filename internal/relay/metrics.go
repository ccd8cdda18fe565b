package relay

import "github.com/pvans-project/pvans/internal/metrics"

// counters are the relay's counters, each declared once (metrics.Register).
type counters struct {
	sightings    metrics.Counter `metric:"pvans_relay_sightings_total" help:"Beacons and discovery replies relayed to relay.to."`
	datagrams    metrics.Counter `metric:"pvans_relay_datagrams_total" help:"Datagrams sent to relay.to destinations (a sighting to each)."`
	rate         metrics.Counter `metric:"pvans_relay_dropped_total" label:"reason=rate" help:"Sightings not relayed, by reason: rate (relay.DefaultPerSecond), not_relayable (a loopback, link-local, multicast, broadcast or unspecified server address), second_hand (sent by another relay: only what was heard first hand is relayed), send_error (per datagram)."`
	notRelayable metrics.Counter `metric:"pvans_relay_dropped_total" label:"reason=not_relayable"`
	secondHand   metrics.Counter `metric:"pvans_relay_dropped_total" label:"reason=second_hand"`
	sendErrors   metrics.Counter `metric:"pvans_relay_dropped_total" label:"reason=send_error"`

	knownEvictions  metrics.Counter `metric:"pvans_relay_known_evictions_total" help:"Servers pushed out of the full re-announce table (the one heard longest ago)."`
	reannounces     metrics.Counter `metric:"pvans_relay_reannounces_total" help:"Re-announces started: a discovery ping from a relay.to destination got every kept server sent to it again."`
	reannounced     metrics.Counter `metric:"pvans_relay_reannounced_total" help:"Sightings sent again in re-announces."`
	pingsNotRelayTo metrics.Counter `metric:"pvans_relay_pings_ignored_total" label:"reason=not_relay_to" help:"Discovery pings that started no re-announce, by reason: not_relay_to (from an address not in relay.to), too_soon (one ran or started there within 10 s)."`
	pingsTooSoon    metrics.Counter `metric:"pvans_relay_pings_ignored_total" label:"reason=too_soon"` // within ReannounceGap of the last re-announce, or during one
}

// RegisterMetrics exposes the relay's counters and gauge (docs/operations.md).
func (r *Relay) RegisterMetrics(m *metrics.Metrics) {
	m.Register(&r.counters)
	m.Gauge("relay", "known_servers", "Servers heard first hand and kept for a re-announce (at most registry.max_servers, each for beacon.expiry).", nil, func() float64 { return float64(r.Known()) })
}
