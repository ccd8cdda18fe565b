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
	m.HintsDropped("unmatched", func() uint64 { s := st(); return s.Unmatched + s.UnknownCID })
	m.HintsDropped("tcp_third_party", func() uint64 { return st().ThirdParty })
	m.Counter("searchring", "duplicates_total", "Claims by a second server for a name already resolved.", nil, metrics.U64(func() uint64 { return st().Duplicates }))
	m.Counter("searchring", "pokes_total", "Hurry-up requests (new server seen, name server validated, operator), by result: accepted, or ignored during the 30 s hold-off or a fast revolution.",
		metrics.Label("result", "accepted"), metrics.U64(func() uint64 { return st().Pokes }))
	m.Counter("searchring", "pokes_total", "Hurry-up requests (new server seen, name server validated, operator), by result: accepted, or ignored during the 30 s hold-off or a fast revolution.",
		metrics.Label("result", "ignored"), metrics.U64(func() uint64 { return st().PokesIgnored }))
	m.Counters("searchring", "limit_hits_total", "Search-through work refused at a bound, by limit: names (a name wanted beyond searchring.DefaultMaxChannels is not searched through), datagrams (a datagram over searchring.DefaultDatagramsPerSecond is not sent), claims (the oldest remembered claim of a server on a name forgotten beyond searchring.DefaultMaxChannels).", "limit", map[string]func() uint64{
		"names":     func() uint64 { return st().ChannelsRefused },
		"datagrams": func() uint64 { return st().DatagramsLimited },
		"claims":    func() uint64 { return st().ClaimsForgotten },
	})
	m.Counter("searchring", "reentered_total", "Resolved names put back into search because the server they were resolved to was lost.",
		nil, metrics.U64(func() uint64 { return st().Reentered }))
}

// RegisterDestinationMetrics exports the per-destination counters.
// current returns the search destinations and name servers configured now
// (they change on reload): each has its series, at zero until the first
// send; a destination dropped by a reload keeps its series.
func (r *Ring) RegisterDestinationMetrics(m *metrics.Metrics, current func() (udp, upstream []netip.AddrPort)) {
	m.Reg.MustRegister(&destCollector{r: r, current: current})
}

var (
	descDestination = prometheus.NewDesc(prometheus.BuildFQName(metrics.Namespace, "searchring", "destination_datagrams_total"),
		"Search-through datagrams sent to each UDP search destination, by result: sent or error.",
		[]string{"destination", "result"}, nil)
	descUpstream = prometheus.NewDesc(prometheus.BuildFQName(metrics.Namespace, "searchring", "upstream_searches_total"),
		"Search messages for each upstream name server, by result: sent, or skipped because more than 64 KiB was still waiting to be written to it.",
		[]string{"server", "result"}, nil)
)

type destCollector struct {
	r       *Ring
	current func() (udp, upstream []netip.AddrPort)
}

func (c *destCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descDestination
	ch <- descUpstream
}

func (c *destCollector) Collect(ch chan<- prometheus.Metric) {
	udp, up := c.current()
	all := map[destKey]DestinationStats{}
	for _, a := range udp {
		all[destKey{ap: a}] = DestinationStats{}
	}
	for _, a := range up {
		all[destKey{ap: a, upstream: true}] = DestinationStats{}
	}
	c.r.dests.mu.Lock()
	for k, s := range c.r.dests.m {
		all[k] = *s
	}
	c.r.dests.mu.Unlock()
	for k, s := range all {
		if k.upstream {
			ch <- prometheus.MustNewConstMetric(descUpstream, prometheus.CounterValue, float64(s.Sent), k.ap.String(), "sent")
			ch <- prometheus.MustNewConstMetric(descUpstream, prometheus.CounterValue, float64(s.Skipped), k.ap.String(), "skipped")
		} else {
			ch <- prometheus.MustNewConstMetric(descDestination, prometheus.CounterValue, float64(s.Sent), k.ap.String(), "sent")
			ch <- prometheus.MustNewConstMetric(descDestination, prometheus.CounterValue, float64(s.Errors), k.ap.String(), "error")
		}
	}
}
