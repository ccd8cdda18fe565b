//go:build linux

package trust

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// One host beacons 200 of its ports, each a server that completes the
// handshake and never answers CREATE_CHANNEL, so each probe of it holds a
// slot of the pool until the echo after the request comes back and the
// grace after it (probe.ServerPVGrace) has passed. A real IOC on another
// host that beacons afterwards is listed while most of the silent servers
// are still waiting for their probe: that host's probes take no more than
// its share of the pool. Counted, not timed: with the silent host's share
// (4 at a time, each over a second) its 200 probes take about a minute,
// and a pool that made the real IOC wait its turn would list it only
// after all of them had run.
func TestSilentServersOfOneHostDoNotStallProbes(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	tp.start(t, "--rate-limit-beacons-per-second", "0")
	evil := tp.sim(t, sim.Options{Servers: 200, Host: evilAddr, IgnoreChannels: true, NamesPerServer: 1,
		BeaconDests: []netip.AddrPort{pvansUDP}})
	testutil.WaitFor(t, 15*time.Second, "the silent servers to be tracked", func() bool {
		return len(tp.servers(t)) >= evil.Len()
	})
	probed := func() float64 { // probes ended, whatever their result (a series not yet counted is -1)
		n := 0.0
		for _, r := range []string{"ok", "failed", "refused"} {
			n += max(0, tp.metric(t, `pvans_probe_total{result="`+r+`"}`))
		}
		return n
	}
	start := time.Now()
	site := tp.sim(t, sim.Options{Host: iocAddr, Names: [][]string{{"real:one"}}, BeaconDests: []netip.AddrPort{pvansUDP}})
	g := site.Server(0).GUID
	testutil.WaitFor(t, 60*time.Second, "real:one held by the real IOC", func() bool { return tp.holder(t, "real:one") == g.String() })
	done := probed()
	t.Logf("real IOC listed %v after its first beacon, after %v probes, with %d silent servers being probed", time.Since(start), done, evil.Len())
	if done >= float64(evil.Len())/2 {
		t.Fatalf("real IOC %v listed after %v probes ended, with %d silent servers: it waited for theirs", g, done, evil.Len())
	}
}

// Legitimate restarts with a new GUID, of a PVXS-style IOC (answers the
// TCP ping over TCP), a pvAccessCPP-style one (over UDP, to the ping's
// reply port), one that answers no ping but a search for a name it listed
// (which proves its GUID as well), and one that answers no search over
// TCP at all: each new instance is listed under its new GUID from its
// first beacon (the site's clock never moves: each instance sends that one
// beacon and no other, so the wait is only a hang guard). For the three that prove their GUID, forged beacons alternating two GUIDs from the
// IOC's address run throughout and name nobody; one that proves nothing
// cannot tell them from its new instance's (docs/SECURITY.md, "Restart at a
// known endpoint"), so its restart is shown clean. Its claim is taken
// only once its old instance's close was seen, as when a process exits
// before its successor beacons; the simulated restart is instant, so it
// is stopped first and started once pvans saw it go (else, on a loaded
// machine, pvans could read the new beacon before the old close and,
// as documented, drop that claim until the next beacon, 15 s on).
func TestRestartsFollowedUnderForgedBeacons(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	tp.start(t)
	for i, v := range []struct {
		name      string
		o         sim.Options
		forged    bool
		stopFirst bool
	}{
		{"pvxs", sim.Options{}, true, false},
		{"pvaccesscpp", sim.Options{TCPSearchOverUDP: true}, true, false},
		{"noping", sim.Options{NoPing: true}, true, false},
		{"nosearch", sim.Options{NoTCPSearch: true}, false, true},
	} {
		o := v.o
		o.Host, o.Names, o.BeaconDests = iocAddr, [][]string{{v.name + ":a"}}, []netip.AddrPort{pvansUDP}
		o.Clock = clock.NewFake(time.Now())
		// A restart rebinds the listener's port. An ephemeral one (43631)
		// once failed to bind at load 30 ("address already in use"): a
		// fixed port outside the ephemeral range, as an IOC's 5075.
		o.TCPPort = uint16(5075 + 10*i)
		site := tp.sim(t, o)
		g, ep := site.Server(0).GUID, site.Server(0).TCP
		tp.waitHolder(t, g, v.name+":a")
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; v.forged; i++ {
				select {
				case <-stop:
					return
				case <-time.After(500 * time.Millisecond):
				}
				f := pva.GUID{0xEE, byte(i % 2), 0xEE}
				_ = tp.s.Do(func() error { // not tp.send: t.Fatal belongs to the test's goroutine
					c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(iocAddr, 0)))
					if err != nil {
						return err
					}
					defer c.Close()
					_, err = c.WriteToUDPAddrPort(beaconMsg(f, pva.AddressFrom(iocAddr), ep.Port(), "tcp"), pvansUDP)
					return err
				})
			}
		}()
		time.Sleep(1500 * time.Millisecond) // claims pending
		if v.stopFirst {
			lost := strings.Count(tp.pv.Output(), `"msg":"server lost"`)
			if err := site.Stop(0); err != nil {
				t.Fatal(err)
			}
			testutil.WaitFor(t, 10*time.Second, v.name+" close seen", func() bool {
				return strings.Count(tp.pv.Output(), `"msg":"server lost"`) > lost
			})
		}
		start := time.Now()
		if err := tp.s.Do(func() error { return site.Restart(0) }); err != nil {
			t.Fatal(err)
		}
		g2 := site.Server(0).GUID
		testutil.WaitFor(t, 60*time.Second, v.name+" restart followed", func() bool { return tp.holder(t, v.name+":a") == g2.String() })
		took := time.Since(start)
		close(stop)
		<-done
		t.Logf("%s: new GUID listed %v after the restart", v.name, took)
		site.Close()
	}
}
