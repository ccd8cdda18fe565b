package relay

import "github.com/pvans-project/pvans/internal/metrics"

// RegisterMetrics exposes the relay's Stats (docs/operations.md).
func (r *Relay) RegisterMetrics(m *metrics.Metrics) {
	st := r.Stats
	m.Counter("relay", "sightings_total", "Beacons and discovery replies relayed to relay.to.", nil, metrics.U64(func() uint64 { return st().Relayed }))
	m.Counter("relay", "datagrams_total", "Datagrams sent to relay.to destinations (a sighting to each).", nil, metrics.U64(func() uint64 { return st().Datagrams }))
	m.Counters("relay", "dropped_total", "Sightings not relayed, by reason: rate (relay.max_per_second), not_relayable (a loopback, link-local, multicast, broadcast or unspecified server address), second_hand (sent by another relay: only what was heard first hand is relayed), send_error (per datagram).", "reason", map[string]func() uint64{
		"rate":          func() uint64 { return st().Rate },
		"not_relayable": func() uint64 { return st().NotRelayable },
		"second_hand":   func() uint64 { return st().SecondHand },
		"send_error":    func() uint64 { return st().SendErrors },
	})
	m.Gauge("relay", "known_servers", "Servers heard first hand and kept for a re-announce (at most registry.max_servers, each for beacon.expiry).", nil, func() float64 { return float64(st().Known) })
	m.Counter("relay", "known_evictions_total", "Servers pushed out of the full re-announce table (the one heard longest ago).", nil, metrics.U64(func() uint64 { return st().KnownEvictions }))
	m.Counter("relay", "reannounces_total", "Re-announces started: a discovery ping from a relay.to destination got every kept server sent to it again.", nil, metrics.U64(func() uint64 { return st().Reannounces }))
	m.Counter("relay", "reannounced_total", "Sightings sent again in re-announces.", nil, metrics.U64(func() uint64 { return st().Reannounced }))
	m.Counters("relay", "pings_ignored_total", "Discovery pings that started no re-announce, by reason: not_relay_to (from an address not in relay.to), too_soon (one ran or started there within 10 s).", "reason", map[string]func() uint64{
		"not_relay_to": func() uint64 { return st().PingsIgnored },
		"too_soon":     func() uint64 { return st().PingsTooSoon },
	})
}
