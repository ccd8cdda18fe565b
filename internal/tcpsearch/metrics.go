package tcpsearch

import (
	"sync/atomic"

	"github.com/pvans-project/pvans/internal/metrics"
)

// counters are the listener's, each declared once, beside its field
// (metrics.Register); the connections' limit hits are pvaconn.Counters.
// The plain atomics are not exported: tests read them.
type counters struct {
	accepted    metrics.Counter `metric:"pvans_tcp_connections_total" help:"TCP name-server connections accepted."`
	tlsAccepted metrics.Counter `metric:"pvans_tcp_tls_connections_total" help:"Connections accepted on the Secure PVAccess (TLS) listener; also in connections_total."`
	searches    metrics.Counter `metric:"pvans_tcp_searches_total" help:"CMD_SEARCH messages received over TCP."`
	names       metrics.Counter `metric:"pvans_tcp_search_names_total" help:"Names in CMD_SEARCH messages received over TCP."`
	claims      metrics.Counter `metric:"pvans_tcp_claims_total" help:"CIDs answered found over TCP (direct and pushed)."`
	pushed      metrics.Counter `metric:"pvans_tcp_pushes_total" help:"Search responses pushed to waiting TCP clients."` // positive CMD_SEARCH_RESPONSE pushed to a waiter

	rejected  metrics.Counter `metric:"pvans_tcp_limit_hits_total" label:"limit=max_connections" help:"TCP connections closed or refused by a limit or fault."` // closed at once: MaxConns reached
	perSource metrics.Counter `metric:"pvans_tcp_limit_hits_total" label:"limit=connections_per_source"`                                                        // the source already had MaxConnsPerSource
	// handshakesLimited: TLS connections closed at accept, before the
	// handshake: their source had spent its handshake budget
	// (TLSHandshakeRate, TLSHandshakeBurst).
	handshakesLimited metrics.Counter `metric:"pvans_tcp_limit_hits_total" label:"limit=tls_handshakes_per_source"`
	decodeErrors      metrics.Counter `metric:"pvans_tcp_limit_hits_total" label:"limit=decode_error"`     // malformed searches (connection closed, as PVXS does)
	rateLimited       metrics.Counter `metric:"pvans_tcp_limit_hits_total" label:"limit=rate_limited"`     // messages dropped: their source was over MessageRate
	namesDropped      metrics.Counter `metric:"pvans_tcp_limit_hits_total" label:"limit=names_per_search"` // names beyond MaxNamesPerSearch, dropped
	// Names the repeat memory forgot early to stay within its bound
	// (ratelimit.Recent).
	repeatsEvicted metrics.Counter `metric:"pvans_repeat_names_evicted_total" label:"via=tcp"`

	denied       metrics.Counter `metric:"pvans_access_denied_total" label:"what=tcp_client"` // closed at once: client refused by ClientAllowed
	certDenied   metrics.Counter `metric:"pvans_access_denied_total" label:"what=tls_client"` // closed at the end of their handshake: refused by ClientCertAllowed
	acceptErrors metrics.Counter `metric:"pvans_tcp_accept_errors_total" help:"accept(2) failures on the name-server port (EMFILE, ENFILE…); each is followed by a back-off of 5 ms doubling to 1 s."`

	// The answer decision's counts (s.rules point here): searches listing no
	// protocol pvans answers; claims skipped, the server's protocol not in
	// the client's list or a zero address or port from the registry; claims
	// of a server known by a loopback address sent to a remote client as
	// "any" (answer.Rules.Claim).
	noProtocol        metrics.Counter `metric:"-"` // never: a TCP search is answered whatever it lists
	protoSkipped      metrics.Counter `metric:"pvans_tcp_claims_withheld_total" label:"reason=protocol" help:"Claims not named to a TCP client, by reason: protocol (a TLS endpoint to a client that did not offer tls), zero_endpoint (the registry had a zero address or port)."`
	zeroEndpoint      metrics.Counter `metric:"pvans_tcp_claims_withheld_total" label:"reason=zero_endpoint"`
	loopbackRewritten metrics.Counter `metric:"pvans_tcp_claims_loopback_rewritten_total" help:"Claims of a server known by a loopback address named \"any\" to a TCP client on another host (the client connects to where the answer came from)."`

	responses  atomic.Uint64 // positive CMD_SEARCH_RESPONSE sent directly
	negative   atomic.Uint64 // found=0 replies (MustReply, discovery ping)
	refused    atomic.Uint64 // CREATE_CHANNEL refused
	ignored    atomic.Uint64 // other application messages drained and ignored
	sendErrors atomic.Uint64 // replies dropped because the connection was closing or full
	active     atomic.Int64  // open now, or closed with their teardown still running (MaxConns)
}

// Connections is the connections open now.
func (s *Server) Connections() int64 { return s.cnt.active.Load() }

// RegisterMetrics exposes the listener's counters, its connections' (one
// declaration: the help of pvans_tcp_limit_hits_total is written above)
// and its gauges (docs/operations.md).
func (s *Server) RegisterMetrics(m *metrics.Metrics) {
	m.Register(&s.cnt, &s.conn)
	m.Gauge("tcp", "connections", "Open TCP name-server connections.", nil, func() float64 { return float64(s.Connections()) })
	m.Gauge("tcp", "buffered_bytes", "Bytes all TCP clients make pvans buffer beyond each connection's base buffers (queued replies beyond 64 KiB per connection, large messages being received), bounded by tcp.buffer_bytes_total.",
		nil, func() float64 { return float64(s.budget.Used()) })
}
