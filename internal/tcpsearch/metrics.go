package tcpsearch

import "github.com/pvans-project/pvans/internal/metrics"

// RegisterMetrics exposes the listener's Stats (docs/operations.md).
func (s *Server) RegisterMetrics(m *metrics.Metrics) {
	st := s.Stats
	m.Gauge("tcp", "connections", "Open TCP name-server connections.", nil, func() float64 { return float64(st().Active) })
	m.Counter("tcp", "connections_total", "TCP name-server connections accepted.", nil, metrics.U64(func() uint64 { return st().Accepted }))
	m.Counter("tcp", "tls_connections_total", "Connections accepted on the Secure PVAccess (TLS) listener; also in connections_total.", nil, metrics.U64(func() uint64 { return st().TLSAccepted }))
	m.Counter("tcp", "searches_total", "CMD_SEARCH messages received over TCP.", nil, metrics.U64(func() uint64 { return st().Searches }))
	m.Counter("tcp", "search_names_total", "Names in CMD_SEARCH messages received over TCP.", nil, metrics.U64(func() uint64 { return st().Names }))
	m.Counter("tcp", "claims_total", "CIDs answered found over TCP (direct and pushed).", nil, metrics.U64(func() uint64 { return st().Claims }))
	m.Counter("tcp", "pushes_total", "Search responses pushed to waiting TCP clients.", nil, metrics.U64(func() uint64 { return st().Pushed }))
	m.Counters("tcp", "limit_hits_total", "TCP connections closed or refused by a limit or fault.", "limit", map[string]func() uint64{
		"max_connections":           func() uint64 { return st().Rejected },
		"connections_per_source":    func() uint64 { return st().PerSourceRejected },
		"tls_handshakes_per_source": func() uint64 { return st().TLSHandshakesLimited },
		"buffer_budget":             func() uint64 { return st().Conn.BudgetExceeded },
		"send_queue":                func() uint64 { return st().Conn.SendQueueFull },
		"message_size":              func() uint64 { return st().Conn.Oversize },
		"idle_timeout":              func() uint64 { return st().Conn.IdleTimeouts },
		"handshake":                 func() uint64 { return st().Conn.HandshakeTimeouts },
		"slow_message":              func() uint64 { return st().Conn.MessageTimeouts },
		"protocol_error":            func() uint64 { return st().Conn.ProtocolErrors },
		"decode_error":              func() uint64 { return st().DecodeErrors },
		"rate_limited":              func() uint64 { return st().RateLimited },
		"names_per_search":          func() uint64 { return st().NamesDropped },
	})
	m.AccessDenied("tcp_client", func() uint64 { return st().Denied })
	m.AccessDenied("tls_client", func() uint64 { return st().CertDenied })
	m.Gauge("tcp", "buffered_bytes", "Bytes all TCP clients make pvans buffer beyond each connection's base buffers (queued replies beyond 64 KiB per connection, large messages being received), bounded by tcpsearch.DefaultBufferBytesTotal.",
		nil, func() float64 { return float64(st().BufferedBytes) })
	m.Counter("tcp", "accept_errors_total", "accept(2) failures on the name-server port (EMFILE, ENFILE…); each is followed by a back-off of 5 ms doubling to 1 s.",
		nil, metrics.U64(func() uint64 { return st().AcceptErrors }))
}
