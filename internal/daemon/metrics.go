package daemon

// registerMetrics has every part expose its own counters (each part's
// metrics.go); the daemon owns only the server allow list's refusals.
func (d *Daemon) registerMetrics() {
	m := d.Metrics
	d.TCP.RegisterMetrics(m)
	d.UDP.RegisterMetrics(m)
	d.Resolver.RegisterMetrics(m)
	d.Registry.RegisterMetrics(m)
	d.Tracker.RegisterMetrics(m)
	d.Ring.RegisterMetrics(m)
	d.httpSrv.RegisterMetrics(m)
	d.Ring.RegisterDestinationMetrics(m, d.UDP.SearchDestinations(), d.conf().PVA.NameServers)
	m.AccessDenied("server", d.deniedServers.Load)
}
