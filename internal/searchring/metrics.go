package searchring

import (
	"net/netip"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pvans-project/pvans/internal/metrics"
)

// RegisterMetrics exposes the ring's counters, gauges and bucket occupancy
// (docs/operations.md).
func (r *Ring) RegisterMetrics(m *metrics.Metrics) {
	st := r.Stats
	m.Gauge("searchring", "channels", "Distinct names being searched through.", nil, func() float64 { return float64(st().Searching) })
	for i := 0; i < Buckets; i++ {
		m.Gauge("searchring", "bucket_channels", "Channels per ring bucket (0 = due next tick).", metrics.Label("bucket", strconv.Itoa(i)),
			func() float64 { return float64(r.Occupancy()[i]) })
	}
	m.Register(&r.ctr)
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
