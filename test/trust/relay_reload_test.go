//go:build linux

package trust

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

// A trusted relay's beacon (whose source anyone can forge) may name
// neither loopback nor pvans's own interface address: either would make
// pvans connect to its own host's services, bound to the wildcard, and
// report what answered (found by the attack on the trust surface).
func TestRelayCannotNamePvansOwnHost(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	tp.start(t, "--access-trusted-relays", evilAddr.String()+"/32")
	// A service on pvans's own host, bound to the wildcard (like sshd, or
	// pvans's own HTTP when exposed), only reachable from the host itself or
	// via its interface address.
	own := connCounter(t, tp.p, netip.MustParseAddrPort("0.0.0.0:7011"))
	// Loopback: refused (the documented rule).
	tp.send(t, netip.AddrPortFrom(evilAddr, 0), pvansUDP, beaconMsg(forgedGUID, pva.AddressFrom(netip.MustParseAddr("127.0.0.1")), 7011, "tcp"))
	time.Sleep(1500 * time.Millisecond)
	t.Logf("after loopback-naming relay beacon: %d connections", own.Load())
	// pvans's own address.
	g2 := pva.GUID{0xEE, 0xEE, 0xEE, 0xEF, 1, 2, 3, 4, 5, 6, 7, 9}
	tp.send(t, netip.AddrPortFrom(evilAddr, 0), pvansUDP, beaconMsg(g2, pva.AddressFrom(pvansAddr), 7011, "tcp"))
	time.Sleep(3 * time.Second)
	n := own.Load()
	t.Logf("after own-address relay beacon: %d connections to pvans's own host service; servers=%+v", n, tp.servers(t))
	if n > 0 {
		t.Errorf("relay beacon naming pvans's own interface address made pvans connect %d times to its own host's service", n)
	}
}

// A reload that narrows access.server_allow while an endpoint named by a
// search-through answer is being retried (known to the prober, no
// registry row yet) forgets it: a server started there later is not
// listed and its names are never answered (found by the attack on the
// trust surface: it was listed ~2 s after the reload).
func TestNarrowedServerAllowForgetsRetriedEndpoint(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "pvans.yaml")
	write := func(allow string) {
		y := "access:\n  server_allow: [" + allow + "]\n"
		if err := os.WriteFile(file, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(serverAllow)
	tp.pv = harness.Start(t, harness.Options{Netns: tp.p, Args: []string{"--config", file, "--discovery-at-start=false",
		"--log-level", "debug", "--search-through", "--addr-list", "10.213.0.255:5076"}})
	sniff := tp.searchListener(t)
	// The attacker (10.213.0.66) will later run a real server at port 7100;
	// at first nothing listens there (connection refused: probe retried).
	const port = 7100
	ep := netip.AddrPortFrom(evilAddr, port)
	g := pva.GUID{0xAB, 0xCD, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	go tp.pv.Query([]string{"victim:x"}, 6*time.Second)
	replyTo, seq, cid := nextSearch(t, sniff, "victim:x")
	tp.send(t, netip.AddrPortFrom(evilAddr, 0), replyTo, replyMsg(g, seq, port, cid))
	time.Sleep(500 * time.Millisecond)
	// The operator notices the attacker and removes it from server_allow.
	write("10.213.0.0/26") // .66 now outside
	n := strings.Count(tp.pv.Output(), "configuration reloaded")
	if err := tp.pv.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "reload", func() bool { return strings.Count(tp.pv.Output(), "configuration reloaded") > n })
	t.Logf("reloaded; now starting the attacker's server at %s", ep)
	// Now the attacker's server appears (it claims arbitrary names).
	tp.sim(t, sim.Options{Host: evilAddr, TCPPort: port, Names: [][]string{{"evil:after-deny", "victim:x"}}})
	// The refused endpoint is retried 1 s after a failure, doubling
	// (probe.DefaultBackoffMin): the server has several chances in this
	// time to be registered, were the reload not in force.
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		if h := tp.holder(t, "evil:after-deny"); h != "" {
			ans, err := tp.pv.Query([]string{"evil:after-deny"}, 2*time.Second)
			t.Logf("servers: %+v", tp.servers(t))
			t.Errorf("server outside the reloaded access.server_allow registered (holder %s); client answer %+v %v", h, ans, err)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}
