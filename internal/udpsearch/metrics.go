package udpsearch

import "github.com/pvans-project/pvans/internal/metrics"

// RegisterMetrics exposes the search port's Stats (docs/operations.md).
func (s *Server) RegisterMetrics(m *metrics.Metrics) {
	st := s.Stats
	m.Counter("udp", "searches_total", "CMD_SEARCH messages received on the search port.", nil, metrics.U64(func() uint64 { return st().Searches }))
	m.Counter("udp", "search_names_total", "Names in UDP searches presented to the resolver.", nil, metrics.U64(func() uint64 { return st().SearchNames }))
	m.Counter("udp", "claims_total", "Names answered found to UDP searches.", nil, metrics.U64(func() uint64 { return st().Claims }))
	m.Counter("udp", "replies_total", "CMD_SEARCH_RESPONSE messages sent over UDP.", nil, metrics.U64(func() uint64 { return st().Responses }))
	m.Counter("udp", "replies_paced_total", "UDP replies held to keep to their client's pace (udp.client_reply_names_per_second), sent when due.", nil, metrics.U64(func() uint64 { return st().RepliesHeld }))
	m.Counter("udp", "replies_over_tcp_total", "Answers to UDP searches sent over the client's own TCP name-server connection instead of UDP (a paired client).", nil, metrics.U64(func() uint64 { return st().RepliesOverTCP }))
	m.Counter("udp", "replies_diverted_total", "Paced or stashed UDP replies sent over the client's own TCP connection when it was paired.", nil, metrics.U64(func() uint64 { return st().RepliesDiverted }))
	m.Counter("udp", "replies_stashed_total", "UDP replies beyond the client's pace kept (not sent) for a TCP pairing that might come; those that find none count as drops, reason reply_hold.", nil, metrics.U64(func() uint64 { return st().RepliesStashed }))
	m.Counter("udp", "replies_pushed_total", "Search-through answers sent over UDP to a client that searched only over UDP, without waiting for its next search (within its reflection budget).", nil, metrics.U64(func() uint64 { return st().RepliesPushed }))
	m.Counter("udp", "forwards_total", "Unicast searches forwarded to the loopback multicast group.", nil, metrics.U64(func() uint64 { return st().Forwards }))
	m.Counter("udp", "forwards_skipped_total", "Unicast searches not forwarded: no other socket on the host was bound to the search port.", nil, metrics.U64(func() uint64 { return st().ForwardsSkipped }))
	m.Gauge("udp", "port_peers", "Other sockets bound to the search port at the last count (sock_diag); -1 before the first.", nil, func() float64 { return float64(st().PortPeers) })
	m.Counters("udp", "drops_total", "Datagrams dropped on the search port, by reason.", "reason", map[string]func() uint64{
		"rx_overflow":        func() uint64 { return st().KernelDrops },
		"client_rx_overflow": func() uint64 { return st().ClientKernelDrops },
		"multicast_source":   func() uint64 { return st().DropMulticastSource },
		"unknown_interface":  func() uint64 { return st().DropUnknownInterface },
		"truncated":          func() uint64 { return st().DropTruncated },
		"malformed":          func() uint64 { return st().DropMalformed },
		"control":            func() uint64 { return st().DropControl },
		"command":            func() uint64 { return st().DropCommand },
		"tag_not_forwarded":  func() uint64 { return st().DropTagNotForwarded },
		"second_tag":         func() uint64 { return st().DropSecondTag },
		"tag_foreign":        func() uint64 { return st().DropTagForeign },
		"tag_not_search":     func() uint64 { return st().DropTagNotSearch },
		"forwarded_zero":     func() uint64 { return st().DropForwardedZero },
		"ignored_source":     func() uint64 { return st().DropIgnored },
		"bad_reply_address":  func() uint64 { return st().DropReplyAddr },
		"not_our_interface":  func() uint64 { return st().DropNotOurInterface },
		"no_usable_protocol": func() uint64 { return st().DropNoTCP },
		"rate_limited":       func() uint64 { return st().DropRateLimited },
		"reflection_capped":  func() uint64 { return st().ReflectionCapped },
		"beacon_queue":       func() uint64 { return st().DropBeaconQueue },
		"reply_queue":        func() uint64 { return st().DropReplyQueue },
		"reply_hold":         func() uint64 { return st().DropReplyHold },
	})
	m.Counters("", "beacons_total", "Server sightings received.", "via", map[string]func() uint64{
		"beacon":    func() uint64 { return st().Beacons },
		"discovery": func() uint64 { return st().DiscoveryPongs },
	})
	m.AccessDenied("udp_client", func() uint64 { return st().DropDenied })
	m.HintsDropped("address_mismatch", func() uint64 { return st().HintAddressMismatch })
	m.HintsDropped("sender_not_allowed", func() uint64 { return st().HintNotAllowed })
	m.HintsDropped("protocol", func() uint64 { return st().HintProtocol })
	m.HintsDropped("rate", func() uint64 { return st().HintRate })
	m.HintsDropped("unsolicited", func() uint64 { return st().HintUnsolicited })
	m.HintsDropped("interface", func() uint64 { return st().HintInterface })
}
