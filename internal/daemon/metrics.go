package daemon

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/searchring"
)

// probeObserver counts probe results and their durations.
type probeObserver struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newProbeObserver(m *metrics.Metrics) probeObserver {
	p := probeObserver{
		total: m.CounterVec("probe", "total", "Probes (listings of a server's names through its server RPC), by result: ok, failed (connect, list or timeout error), refused (the server does not offer the listing).", "result"),
		duration: m.Histogram("probe", "duration_seconds", "Time to connect to a server and list its names.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}),
	}
	for _, r := range []string{"ok", "failed", "refused"} {
		p.total.WithLabelValues(r) // export zeros, so rate() works from the start
	}
	p.duration.WithLabelValues()
	return p
}

func (p probeObserver) observe(result string, took time.Duration) {
	p.total.WithLabelValues(result).Inc()
	p.duration.WithLabelValues().Observe(took.Seconds())
}

// registerMetrics exposes every part's Stats under the names documented in
// docs/operations.md.
func (d *Daemon) registerMetrics() {
	m := d.Metrics
	u := func(f func() uint64) func() float64 { return metrics.U64(f) }
	g := func(f func() int64) func() float64 { return func() float64 { return float64(f()) } }
	lbl := func(k, v string) prometheus.Labels { return prometheus.Labels{k: v} }

	if d.TCP != nil {
		tcp := d.TCP.Stats
		m.Gauge("tcp", "connections", "Open TCP name-server connections.", nil, g(func() int64 { return tcp().Active }))
		m.Counter("tcp", "connections_total", "TCP name-server connections accepted.", nil, u(func() uint64 { return tcp().Accepted }))
		m.Counter("tcp", "searches_total", "CMD_SEARCH messages received over TCP.", nil, u(func() uint64 { return tcp().Searches }))
		m.Counter("tcp", "search_names_total", "Names in CMD_SEARCH messages received over TCP.", nil, u(func() uint64 { return tcp().Names }))
		m.Counter("tcp", "claims_total", "CIDs answered found over TCP (direct and pushed).", nil, u(func() uint64 { return tcp().Claims }))
		m.Counter("tcp", "pushes_total", "Search responses pushed to waiting TCP clients.", nil, u(func() uint64 { return tcp().Pushed }))
		for name, f := range map[string]func() uint64{
			"max_connections":  func() uint64 { return tcp().Rejected },
			"send_queue":       func() uint64 { return tcp().Conn.SendQueueFull },
			"message_size":     func() uint64 { return tcp().Conn.Oversize },
			"idle_timeout":     func() uint64 { return tcp().Conn.IdleTimeouts },
			"handshake":        func() uint64 { return tcp().Conn.HandshakeTimeouts },
			"slow_message":     func() uint64 { return tcp().Conn.MessageTimeouts },
			"protocol_error":   func() uint64 { return tcp().Conn.ProtocolErrors },
			"decode_error":     func() uint64 { return tcp().DecodeErrors },
			"rate_limited":     func() uint64 { return tcp().RateLimited },
			"names_per_search": func() uint64 { return tcp().NamesDropped },
		} {
			m.Counter("tcp", "limit_hits_total", "TCP connections closed or refused by a limit or fault.", lbl("limit", name), u(f))
		}
	}
	if d.UDP != nil {
		udp := d.UDP.Stats
		m.Counter("udp", "searches_total", "CMD_SEARCH messages received on the search port.", nil, u(func() uint64 { return udp().Searches }))
		m.Counter("udp", "search_names_total", "Names in UDP searches presented to the resolver.", nil, u(func() uint64 { return udp().SearchNames }))
		m.Counter("udp", "claims_total", "Names answered found to UDP searches.", nil, u(func() uint64 { return udp().Claims }))
		m.Counter("udp", "replies_total", "CMD_SEARCH_RESPONSE messages sent over UDP.", nil, u(func() uint64 { return udp().Responses }))
		m.Counter("udp", "forwards_total", "Unicast searches forwarded to the loopback multicast group.", nil, u(func() uint64 { return udp().Forwards }))
		for name, f := range map[string]func() uint64{
			"rx_overflow":        func() uint64 { return udp().KernelDrops },
			"client_rx_overflow": func() uint64 { return udp().ClientKernelDrops },
			"multicast_source":   func() uint64 { return udp().DropMulticastSource },
			"unknown_interface":  func() uint64 { return udp().DropUnknownInterface },
			"truncated":          func() uint64 { return udp().DropTruncated },
			"malformed":          func() uint64 { return udp().DropMalformed },
			"control":            func() uint64 { return udp().DropControl },
			"command":            func() uint64 { return udp().DropCommand },
			"tag_not_forwarded":  func() uint64 { return udp().DropTagNotForwarded },
			"second_tag":         func() uint64 { return udp().DropSecondTag },
			"tag_foreign":        func() uint64 { return udp().DropTagForeign },
			"tag_not_search":     func() uint64 { return udp().DropTagNotSearch },
			"forwarded_zero":     func() uint64 { return udp().DropForwardedZero },
			"ignored_source":     func() uint64 { return udp().DropIgnored },
			"bad_reply_address":  func() uint64 { return udp().DropReplyAddr },
			"not_our_interface":  func() uint64 { return udp().DropNotOurInterface },
			"no_usable_protocol": func() uint64 { return udp().DropNoTCP },
			"rate_limited":       func() uint64 { return udp().DropRateLimited },
			"reflection_capped":  func() uint64 { return udp().ReflectionCapped },
		} {
			m.Counter("udp", "drops_total", "Datagrams dropped on the search port, by reason.", lbl("reason", name), u(f))
		}
	}
	denied := map[string]func() uint64{
		"name":   func() uint64 { return d.Resolver.Stats().Denied },
		"server": d.deniedServers.Load,
	}
	if d.TCP != nil {
		denied["tcp_client"] = func() uint64 { return d.TCP.Stats().Denied }
	}
	if d.UDP != nil {
		denied["udp_client"] = func() uint64 { return d.UDP.Stats().DropDenied }
	}
	for what, f := range denied {
		m.Counter("", "access_denied_total", "Requests refused by the access lists, by what was refused: tcp_client, udp_client, name, server.", lbl("what", what), u(f))
	}
	res := d.Resolver.Stats
	m.Gauge("resolver", "waiters", "Unresolved (connection, CID) pairs waiting for a push.", nil, g(func() int64 { return res().Waiting }))
	m.Counter("resolver", "pushes_total", "Waiters answered by push when their name was learned.", nil, u(func() uint64 { return res().Pushed }))

	reg := d.Registry
	m.Gauge("registry", "servers", "Servers in the registry.", nil, func() float64 { return float64(reg.Counts().Servers) })
	m.Gauge("registry", "names", "Distinct names answered for.", nil, func() float64 { return float64(reg.Counts().Names) })
	m.Gauge("registry", "duplicate_names", "Names claimed by more than one server.", nil, func() float64 { return float64(reg.Counts().DuplicateNames) })
	m.Gauge("registry", "unverified_servers", "Servers loaded from the snapshot and not yet confirmed.", nil, func() float64 { return float64(reg.Counts().Unverified) })
	m.Counter("registry", "limit_drops_total", "Registrations refused at a bound.", lbl("what", "servers"), u(func() uint64 { return reg.Stats().ServerLimitDrops }))
	m.Counter("registry", "limit_drops_total", "Registrations refused at a bound.", lbl("what", "names"), u(func() uint64 { return reg.Stats().NameLimitDrops }))

	tr := d.Tracker.Stats
	m.Gauge("beacon", "servers", "Server endpoints tracked from beacons and discovery.", nil, func() float64 { return float64(tr().Tracked) })
	if d.UDP != nil {
		udp := d.UDP.Stats
		m.Counter("", "beacons_total", "Server sightings received.", lbl("via", "beacon"), u(func() uint64 { return udp().Beacons }))
		m.Counter("", "beacons_total", "Server sightings received.", lbl("via", "discovery"), u(func() uint64 { return udp().DiscoveryPongs }))
	}
	for kind, f := range map[string]func() uint64{
		"new":             func() uint64 { return tr().New },
		"changed":         func() uint64 { return tr().Changed },
		"sources_changed": func() uint64 { return tr().SourcesChanged },
		"lost":            func() uint64 { return tr().Lost },
		"dropped":         func() uint64 { return tr().Dropped },
	} {
		m.Counter("beacon", "events_total", "Server tracker events.", lbl("kind", kind), u(f))
	}

	if d.Ring != nil {
		ring := d.Ring
		m.Gauge("searchring", "channels", "Distinct names being searched through.", nil, func() float64 { return float64(ring.Stats().Searching) })
		for i := 0; i < searchring.Buckets; i++ {
			m.Gauge("searchring", "bucket_channels", "Channels per ring bucket (0 = due next tick).", lbl("bucket", strconv.Itoa(i)),
				func() float64 { return float64(ring.Occupancy()[i]) })
		}
		m.Counter("searchring", "datagrams_total", "Search datagrams built by the ring (each goes to every destination).", nil, u(func() uint64 { return ring.Stats().Datagrams }))
		m.Counter("searchring", "names_searched_total", "Names packed into search datagrams.", nil, u(func() uint64 { return ring.Stats().NamesSearched }))
		m.Counter("searchring", "replies_total", "Search responses processed by the ring.", nil, u(func() uint64 { return ring.Stats().Replies }))
		m.Counter("searchring", "duplicates_total", "Claims by a second server for a name already resolved.", nil, u(func() uint64 { return ring.Stats().Duplicates }))
	}
}
