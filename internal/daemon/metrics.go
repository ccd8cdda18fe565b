package daemon

import (
	"fmt"
	"net/netip"

	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/limitlog"
	"github.com/pvans-project/pvans/internal/metrics"
)

// registerMetrics has every part expose its own counters (each part's
// metrics.go); the daemon owns only the server allow list's refusals.
func (d *Daemon) registerMetrics() {
	m := d.Metrics
	d.TCP.RegisterMetrics(m)
	d.ServerPV.RegisterMetrics(m)
	d.UDP.RegisterMetrics(m)
	d.Twins.RegisterMetrics(m)
	d.Resolver.RegisterMetrics(m)
	d.Registry.RegisterMetrics(m)
	m.Gauge("registry", "servers_down", "Servers lost (after they were listed over TCP) and not back at their endpoint, shown as down for httpapi.DefaultShowDownFor.",
		nil, func() float64 { return float64(len(d.Down.List(d.clk.Now(), httpapi.DefaultShowDownFor))) })
	m.Counter("registry", "servers_down_evicted_total", fmt.Sprintf("Servers dropped from the down list at its bound (%d, oldest first).", events.MaxDown),
		nil, metrics.U64(d.Down.Evicted))
	d.Tracker.RegisterMetrics(m)
	d.Ring.RegisterMetrics(m)
	d.httpSrv.RegisterMetrics(m)
	d.Ring.RegisterDestinationMetrics(m, func() (udp, upstream []netip.AddrPort) {
		return d.UDP.SearchDestinations(), d.lists.Load().nameServers
	})
	d.DNS.RegisterMetrics(m)
	d.Relay.RegisterMetrics(m)
	rounds := map[string]func() uint64{}
	for t, n := range d.discoveries {
		rounds[t] = n.Load
	}
	m.Counters("discovery", "rounds_total", "Discovery pings sent to every search destination, by trigger: start, periodic (discovery.interval), reload and dns (new destinations), operator (POST /v1/discover).", "trigger", rounds)
	d.Upstream.RegisterMetrics(m)
	d.Prober.RegisterMetrics(m)
	d.Insight.RegisterMetrics(m)
	m.AccessDenied("server", d.deniedServers.Load)
	m.Counter("log", "lines_suppressed_total", fmt.Sprintf("Log lines not written: each message is written at most %d times per %s, then one summary line says how many were not (docs/operations.md, \"Logs\").", limitlog.LinesPerInterval, limitlog.Interval),
		nil, metrics.U64(d.logBudget.Suppressed))
	d.Keys.RegisterMetrics(m) // nil without a keychain: the metrics read 0
}
