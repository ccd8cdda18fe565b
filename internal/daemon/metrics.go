package daemon

import (
	"fmt"
	"net/netip"

	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/limitlog"
	"github.com/pvans-project/pvans/internal/metrics"
)

// counters are the daemon's own, each declared once (metrics.Register).
type counters struct {
	deniedServers metrics.Counter `metric:"pvans_access_denied_total" label:"what=server"` // sightings and answers refused by the server allow list
	// Discovery rounds by trigger (discoveryRounds).
	roundsStart    metrics.Counter `metric:"pvans_discovery_rounds_total" label:"trigger=start" help:"Discovery pings sent to every search destination, by trigger: start, periodic (discovery.interval), reload and dns (new destinations), operator (POST /v1/discover)."`
	roundsPeriodic metrics.Counter `metric:"pvans_discovery_rounds_total" label:"trigger=periodic"`
	roundsReload   metrics.Counter `metric:"pvans_discovery_rounds_total" label:"trigger=reload"`
	roundsDNS      metrics.Counter `metric:"pvans_discovery_rounds_total" label:"trigger=dns"`
	roundsOperator metrics.Counter `metric:"pvans_discovery_rounds_total" label:"trigger=operator"`
}

// registerMetrics has every part expose its own counters (each part's
// metrics.go); the daemon owns only the server allow list's refusals and
// the discovery rounds.
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
	d.Upstream.RegisterMetrics(m)
	d.Prober.RegisterMetrics(m)
	d.Insight.RegisterMetrics(m)
	m.Register(&d.counters)
	m.Counter("log", "lines_suppressed_total", fmt.Sprintf("Log lines not written: each message is written at most %d times per %s, then one summary line says how many were not (docs/operations.md, \"Logs\").", limitlog.LinesPerInterval, limitlog.Interval),
		nil, metrics.U64(d.logBudget.Suppressed))
	d.Keys.RegisterMetrics(m) // nil without a keychain: the metrics read 0
}
