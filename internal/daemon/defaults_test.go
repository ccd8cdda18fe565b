package daemon

import (
	"fmt"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/tcpsearch"
	"github.com/pvans-project/pvans/internal/udpsearch"
)

// TestConfigFollowsPeerFacts: config.Defaults is the one source of
// production values, and packages keep no copy of one: a zero option means
// the caller did not say (no bound, or off). What packages do keep are
// facts of the protocol and of PVXS peers (docs/protocol.md, "Constants"),
// for the tools and simulated peers that have no configuration; where a
// setting's default follows such a fact, they must agree.
func TestConfigFollowsPeerFacts(t *testing.T) {
	c := config.Defaults()
	type pair struct {
		pkg, setting string
		pkgVal, cfg  any
	}
	dur := func(d time.Duration) any { return d }
	pairs := []pair{
		// EPICS_PVA_SERVER_PORT and EPICS_PVA_BROADCAST_PORT's defaults.
		{"tcpsearch.DefaultPort", "pva.server_port", tcpsearch.DefaultPort, int(c.PVA.ServerPort)},
		{"udpsearch.DefaultPort", "pva.broadcast_port", udpsearch.DefaultPort, int(c.PVA.BroadcastPort)},
		{"probe.DefaultServerPort", "pva.server_port", probe.DefaultServerPort, int(c.PVA.ServerPort)},
		// PVXS's tcpTimeout and echo period with EPICS_PVA_CONN_TMO unset.
		{"pvaconn.DefaultIdleTimeout", "pva.conn_tmo (tcpTimeout)", dur(pvaconn.DefaultIdleTimeout), c.PVA.TCPTimeout()},
		{"pvaconn.DefaultEchoInterval", "pva.conn_tmo (echo)", dur(pvaconn.DefaultEchoInterval), c.PVA.EchoInterval()},
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
	if o := clientConnOptions(&c); o.IdleTimeout != c.PVA.TCPTimeout() || o.MaxMessage != tcpsearch.DefaultMaxMessageBytes {
		t.Errorf("clients options %+v do not follow pva.conn_tmo and tcpsearch's bounds", o)
	}
	if o := upstreamConnOptions(&c); o.IdleTimeout != c.PVA.TCPTimeout() || o.EchoInterval != c.PVA.EchoInterval() {
		t.Errorf("upstream options %+v do not follow pva.conn_tmo", o)
	}
}
