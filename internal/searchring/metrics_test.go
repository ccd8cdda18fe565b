package searchring

import (
	"net/netip"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/pvans-project/pvans/internal/metrics"
)

// Per-destination series: every configured destination has its series
// (zero before the first send), and the counts are the ring's.
func TestDestinationMetrics(t *testing.T) {
	r, clk, rc := newTestRing(t, Options{})
	quiet := netip.MustParseAddrPort("127.0.0.9:5076")
	slow := &upstream{addr: netip.MustParseAddrPort("127.0.0.1:5075"), ready: true, backlog: UpstreamBacklogLimit + 1}
	rc.ups = []Upstream{slow}
	m := metrics.New("test")
	r.RegisterDestinationMetrics(m, func() (udp, up []netip.AddrPort) {
		return []netip.AddrPort{recorderDest, quiet}, []netip.AddrPort{slow.addr}
	})
	r.Want("some:pv")
	clk.Advance(InitialDelay)
	fams, err := m.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, mt := range f.Metric {
			key := f.GetName()
			for _, l := range mt.Label {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			got[key] = counterValue(mt)
		}
	}
	for k, v := range map[string]float64{
		"pvans_searchring_destination_datagrams_total destination=127.0.0.1:5076 result=sent":  1,
		"pvans_searchring_destination_datagrams_total destination=127.0.0.1:5076 result=error": 0,
		"pvans_searchring_destination_datagrams_total destination=127.0.0.9:5076 result=sent":  0,
		"pvans_searchring_upstream_searches_total result=skipped server=127.0.0.1:5075":        1,
		"pvans_searchring_upstream_searches_total result=sent server=127.0.0.1:5075":           0,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (exported %v), want %v", k, g, ok, v)
		}
	}
}

func counterValue(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return -1
}

// The ring's counters are declared once (stats.go): a slip in a tag fails
// here, and the scrape reads the count the ring keeps.
func TestMetricsRegister(t *testing.T) {
	r, _, _ := newTestRing(t, Options{})
	metrics.CheckExported(t, r.RegisterMetrics, map[string]*metrics.Counter{`pvans_searchring_pokes_total{result="ignored"}`: &r.ctr.pokesIgnored})
}
