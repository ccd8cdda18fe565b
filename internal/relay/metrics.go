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
}
