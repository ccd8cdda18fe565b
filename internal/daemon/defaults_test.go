package daemon

import (
	"fmt"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/insight"
	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/serverpv"
	"github.com/pvans-project/pvans/internal/tcpsearch"
	"github.com/pvans-project/pvans/internal/udpsearch"
)

// TestPackageDefaultsAgreeWithConfig: config.Defaults is the one source of
// production values. A package keeps a default only so that a zero option
// is never unsafe, and then it must be the value config.Defaults gives the
// setting that feeds that option (the daemon always passes the setting).
func TestPackageDefaultsAgreeWithConfig(t *testing.T) {
	c := config.Defaults()
	type pair struct {
		pkg, setting string
		pkgVal, cfg  any
	}
	dur := func(d time.Duration) any { return d }
	pairs := []pair{
		{"registry.DefaultMaxServers", "registry.max_servers", registry.DefaultMaxServers, c.Registry.MaxServers},
		{"insight.DefaultDigestNamesPerSecond", "insight.digest_names_per_second", insight.DefaultDigestNamesPerSecond, c.Insight.DigestNamesPerSecond},
		{"registry.DefaultMaxNames", "registry.max_names", registry.DefaultMaxNames, c.Registry.MaxNames},
		{"registry.DefaultUnverifiedTTL", "snapshot.unverified_window", dur(registry.DefaultUnverifiedTTL), c.Snapshot.UnverifiedWindow},
		{"beacon.DefaultExpiry", "beacon.expiry", dur(beacon.DefaultExpiry), c.Beacon.Expiry},
		{"beacon.DefaultCheckInterval", "beacon.check_interval", dur(beacon.DefaultCheckInterval), c.Beacon.CheckInterval},
		{"beacon.DefaultLimit", "registry.max_servers", beacon.DefaultLimit, c.Registry.MaxServers},
		{"resolver.DefaultMaxWaitsPerClient", "tcp.waiters_per_connection", resolver.DefaultMaxWaitsPerClient, c.TCP.WaitersPerConnection},
		{"tcpsearch.DefaultPort", "pva.server_port", tcpsearch.DefaultPort, int(c.PVA.ServerPort)},
		{"tcpsearch.DefaultMaxConns", "tcp.max_connections", tcpsearch.DefaultMaxConns, c.TCP.MaxConnections},
		{"tcpsearch.DefaultMaxMessage", "tcp.max_message_bytes", int64(tcpsearch.DefaultMaxMessage), c.TCP.MaxMessageBytes},
		{"tcpsearch.DefaultSendQueueBytes", "tcp.send_queue_bytes", int64(tcpsearch.DefaultSendQueueBytes), c.TCP.SendQueueBytes},
		{"udpsearch.DefaultPort", "pva.broadcast_port", udpsearch.DefaultPort, int(c.PVA.BroadcastPort)},
		// the bounds of docs/SECURITY.md, "Bounds"
		{"httpapi.DefaultMaxConns", "http.max_connections", httpapi.DefaultMaxConns, c.HTTP.MaxConnections},
		{"httpapi.DefaultMaxConnsPerSource", "http.max_connections_per_source", httpapi.DefaultMaxConnsPerSource, c.HTTP.MaxConnectionsPerSource},
		{"httpapi.DefaultDiscoverInterval", "http.discover_interval", dur(httpapi.DefaultDiscoverInterval), c.HTTP.DiscoverInterval},
		{"serverpv.DefaultTypesPerConn", "tcp.max_cached_types", serverpv.DefaultTypesPerConn, c.TCP.MaxCachedTypes},
		{"serverpv.DefaultTypeBytesPerConn", "tcp.max_cached_type_bytes", int64(serverpv.DefaultTypeBytesPerConn), c.TCP.MaxCachedTypeBytes},
		{"serverpv.DefaultTypeBytesTotal", "tcp.max_cached_type_bytes_total", int64(serverpv.DefaultTypeBytesTotal), c.TCP.MaxCachedTypeBytesTotal},
		{"udpsearch.DefaultBeaconQueue", "udp.beacon_queue", udpsearch.DefaultBeaconQueue, c.UDP.BeaconQueue},
		{"udpsearch.DefaultReceiveBuffer", "udp.receive_buffer_bytes", int64(udpsearch.DefaultReceiveBuffer), c.UDP.ReceiveBufferBytes},
		{"probe.DefaultConcurrency", "probe.concurrency", probe.DefaultConcurrency, c.Probe.Concurrency},
		{"probe.DefaultPerHostConcurrency", "probe.per_host_concurrency", probe.DefaultPerHostConcurrency, c.Probe.PerHostConcurrency},
		{"probe.DefaultFirstTimeout", "probe.first_timeout", dur(probe.DefaultFirstTimeout), c.Probe.FirstTimeout},
		{"probe.DefaultThroughRetries", "probe.search_through_retries", probe.DefaultThroughRetries, c.Probe.ThroughRetries},
		{"probe.DefaultMaxThrough", "probe.search_through_max", probe.DefaultMaxThrough, c.Probe.ThroughMax},
		{"probe.DefaultEchoInterval", "probe.echo_interval", dur(probe.DefaultEchoInterval), c.Probe.EchoInterval},
		{"probe.DefaultProbeTimeout", "probe.timeout", dur(probe.DefaultProbeTimeout), c.Probe.Timeout},
		{"probe.DefaultReprobe", "probe.reprobe_interval", dur(probe.DefaultReprobe), c.Probe.ReprobeInterval},
		{"probe.DefaultBackoff.Min", "probe.backoff_min", probe.DefaultBackoff.Min, c.Probe.BackoffMin},
		{"probe.DefaultBackoff.Max", "probe.backoff_max", probe.DefaultBackoff.Max, c.Probe.BackoffMax},
		{"probe.DefaultServerPort", "pva.server_port", probe.DefaultServerPort, int(c.PVA.ServerPort)},
		{"pvaconn.DefaultIdleTimeout", "tcp.idle_timeout (auto)", dur(pvaconn.DefaultIdleTimeout), c.TCP.IdleTimeout},
		{"pvaconn.DefaultIdleTimeout", "pva.conn_tmo (tcpTimeout)", dur(pvaconn.DefaultIdleTimeout), c.PVA.TCPTimeout()},
		{"pvaconn.DefaultEchoInterval", "pva.conn_tmo (echo)", dur(pvaconn.DefaultEchoInterval), c.PVA.EchoInterval()},
		{"pvaconn.DefaultEchoInterval", "probe.echo_interval", dur(pvaconn.DefaultEchoInterval), c.Probe.EchoInterval},
		{"pvaconn.DefaultMaxMessage", "probes profile MaxMessageBytes", int64(pvaconn.DefaultMaxMessage), c.Probe.Conn.MaxMessageBytes},
		{"pvaconn.DefaultSendQueueBytes", "clients profile (tcp.send_queue_bytes)", int64(pvaconn.DefaultSendQueueBytes), c.ClientConn().SendQueueBytes},
		{"pvaconn.DefaultSendQueueBytes", "probes profile SendQueueBytes", int64(pvaconn.DefaultSendQueueBytes), c.Probe.Conn.SendQueueBytes},
		{"pvaconn.DefaultHandshakeTimeout", "clients profile (tcp.read_timeout)", dur(pvaconn.DefaultHandshakeTimeout), c.ClientConn().HandshakeTimeout},
		{"pvaconn.DefaultHandshakeTimeout", "probes profile HandshakeTimeout", dur(pvaconn.DefaultHandshakeTimeout), c.Probe.Conn.HandshakeTimeout},
		{"pvaconn.DefaultMessageTimeout", "clients profile (tcp.read_timeout)", dur(pvaconn.DefaultMessageTimeout), c.ClientConn().MessageTimeout},
	}
	for _, p := range pairs {
		if fmt.Sprint(p.pkgVal) != fmt.Sprint(p.cfg) {
			t.Errorf("%s = %v, but config.Defaults has %s = %v", p.pkg, p.pkgVal, p.setting, p.cfg)
		}
	}
}

// TestDaemonPassesEveryConnectionOption: the daemon's connections take
// every limit from a config profile, never from pvaconn's fallbacks, so a
// profile changed in config.Defaults is the value that runs.
func TestDaemonPassesEveryConnectionOption(t *testing.T) {
	c := config.Defaults()
	for name, o := range map[string]pvaconn.Options{
		"clients":  clientConnOptions(&c),
		"probes":   connOptions(c.Probe.Conn),
		"upstream": upstreamConnOptions(&c),
	} {
		if o.MaxMessage <= 0 || o.SendQueueBytes <= 0 || o.HandshakeTimeout <= 0 || o.MessageTimeout <= 0 {
			t.Errorf("%s: a limit is left to pvaconn's default: %+v", name, o)
		}
	}
	if o := clientConnOptions(&c); o.IdleTimeout != c.TCP.IdleTimeout || o.MaxMessage != int(c.TCP.MaxMessageBytes) {
		t.Errorf("clients options %+v do not follow the tcp settings", o)
	}
	if o := upstreamConnOptions(&c); o.IdleTimeout != c.PVA.TCPTimeout() || o.EchoInterval != c.PVA.EchoInterval() {
		t.Errorf("upstream options %+v do not follow pva.conn_tmo", o)
	}
}
