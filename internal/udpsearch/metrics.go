package udpsearch

import "github.com/pvans-project/pvans/internal/metrics"

// RegisterMetrics exposes the search port's counters, declared in
// stats.go and forward.go, and its gauge (docs/operations.md).
func (s *Server) RegisterMetrics(m *metrics.Metrics) {
	m.Register(&s.st)
	m.Gauge("udp", "port_peers", "Other sockets bound to the search port at the last count (sock_diag); -1 before the first.", nil, func() float64 { return float64(s.st.portPeers.Load()) })
}
