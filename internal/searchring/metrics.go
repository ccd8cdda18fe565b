package searchring

import (
	"net/netip"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pvans-project/pvans/internal/metrics"
)

// RegisterMetrics exposes the ring's Stats and bucket occupancy
// (docs/operations.md).
func (r *Ring) RegisterMetrics(m *metrics.Metrics) {
	st := r.Stats
	m.Gauge("searchring", "channels", "Distinct names being searched through.", nil, func() float64 { return float64(st().Searching) })
	for i := 0; i < Buckets; i++ {
		m.Gauge("searchring", "bucket_channels", "Channels per ring bucket (0 = due next tick).", metrics.Label("bucket", strconv.Itoa(i)),
			func() float64 { return float64(r.Occupancy()[i]) })
	}
	m.Counter("searchring", "datagrams_total", "Search datagrams built by the ring (each goes to every destination).", nil, metrics.U64(func() uint64 { return st().Datagrams }))
	m.Counter("searchring", "names_searched_total", "Names packed into search datagrams.", nil, metrics.U64(func() uint64 { return st().NamesSearched }))
	m.Counter("searchring", "replies_total", "Search responses processed by the ring.", nil, metrics.U64(func() uint64 { return st().Replies }))
	m.Counter("searchring", "duplicates_total", "Claims by a second server for a name already resolved.", nil, metrics.U64(func() uint64 { return st().Duplicates }))
	m.Counter("searchring", "pokes_total", "Hurry-up requests (new server seen, name server validated, operator), by result: accepted, or ignored during the 30 s hold-off or a fast revolution.",
		metrics.Label("result", "accepted"), metrics.U64(func() uint64 { return st().Pokes }))
	m.Counter("searchring", "pokes_total", "Hurry-up requests (new server seen, name server validated, operator), by result: accepted, or ignored during the 30 s hold-off or a fast revolution.",
		metrics.Label("result", "ignored"), metrics.U64(func() uint64 { return st().PokesIgnored }))
	m.Counters("searchring", "limit_hits_total", "Search-through work refused at a bound, by limit: names (a name wanted beyond search.through_max_names is not searched through), datagrams (a datagram over search.through_datagrams_per_second is not sent).", "limit", map[string]func() uint64{
		"names":     func() uint64 { return st().ChannelsRefused },
		"datagrams": func() uint64 { return st().DatagramsLimited },
	})
	m.Counter("searchring", "reentered_total", "Resolved names put back into search because the server they were resolved to was lost.",
		nil, metrics.U64(func() uint64 { return st().Reentered }))
}

// RegisterDestinationMetrics exports the per-destination counters. udp are
// the search destinations and upstream the name servers the daemon was
// configured with: each gets its series (at zero) from the start, so
// rate() works before the first send.
func (r *Ring) RegisterDestinationMetrics(m *metrics.Metrics, udp, upstream []netip.AddrPort) {
	u := metrics.U64
	for _, to := range dedup(udp) {
		lbl := func(result string) prometheus.Labels {
			return prometheus.Labels{"destination": to.String(), "result": result}
		}
		m.Counter("searchring", "destination_datagrams_total", "Search-through datagrams sent to each UDP search destination, by result: sent or error.",
			lbl("sent"), u(func() uint64 { return r.UDPDestination(to).Sent }))
		m.Counter("searchring", "destination_datagrams_total", "Search-through datagrams sent to each UDP search destination, by result: sent or error.",
			lbl("error"), u(func() uint64 { return r.UDPDestination(to).Errors }))
	}
	for _, to := range dedup(upstream) {
		lbl := func(result string) prometheus.Labels {
			return prometheus.Labels{"server": to.String(), "result": result}
		}
		m.Counter("searchring", "upstream_searches_total", "Search messages for each upstream name server, by result: sent, or skipped because more than 64 KiB was still waiting to be written to it.",
			lbl("sent"), u(func() uint64 { return r.UpstreamDestination(to).Sent }))
		m.Counter("searchring", "upstream_searches_total", "Search messages for each upstream name server, by result: sent, or skipped because more than 64 KiB was still waiting to be written to it.",
			lbl("skipped"), u(func() uint64 { return r.UpstreamDestination(to).Skipped }))
	}
}

// dedup drops repeated destinations (a list may name one twice; two
// series with the same labels cannot be registered).
func dedup(in []netip.AddrPort) []netip.AddrPort {
	seen := make(map[netip.AddrPort]bool, len(in))
	var out []netip.AddrPort
	for _, a := range in {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}
