package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/searchring"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
)

// udpRx is a loopback socket standing for a search destination.
func udpRx(t *testing.T, addr string) *net.UDPConn {
	t.Helper()
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.(*net.UDPConn)
}

func rxAddr(c *net.UDPConn) netip.AddrPort { return c.LocalAddr().(*net.UDPAddr).AddrPort() }

// readSearches reads the CMD_SEARCH datagrams arriving at c within wait
// (after the first, until quiet for quiet).
func readSearches(c *net.UDPConn, wait, quiet time.Duration) [][]byte {
	var out [][]byte
	buf := make([]byte, 65536)
	deadline := time.Now().Add(wait)
	for {
		c.SetReadDeadline(deadline)
		n, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return out
		}
		if n >= pva.HeaderSize && pva.Command(buf[3]) == pva.CmdSearch {
			out = append(out, bytes.Clone(buf[:n]))
		}
		deadline = time.Now().Add(quiet)
	}
}

func searchNames(t *testing.T, d []byte) (flags uint8, names []string) {
	t.Helper()
	h, p, _, err := pva.SplitMessage(d)
	var m pva.Search
	if err != nil || m.Decode(p, h.BigEndian()) != nil {
		t.Fatalf("undecodable search %x", d)
	}
	for _, n := range m.Names {
		names = append(names, string(n.Name))
	}
	return m.Flags, names
}

func hasName(t *testing.T, ds [][]byte, name string) bool {
	for _, d := range ds {
		_, ns := searchNames(t, d)
		for _, n := range ns {
			if n == name {
				return true
			}
		}
	}
	return false
}

// The discovery ping and the search-through search pvans sends to a unicast
// destination are byte for byte what pvxlist and pvxget sent in the capture
// (blocks #39 and #3), but for the client's own reply port and CIDs: flags
// 0x81 and 0x80, zero reply address, big endian, version 2. The ping keeps
// PVXS's constant "find" sequence; the search-through search uses the
// ring's own random sequence ID (a reply must echo it to count).
func TestClientDatagramsAsPVXSBuildsThem(t *testing.T) {
	blocks := testutil.CaptureBlocks(t)
	rx := udpRx(t, "127.0.0.1:0")
	d := startDaemon(t, testConfig(t, rxAddr(rx))) // pings at start
	port := d.UDP.ClientAddr().Port()

	got := readSearches(rx, 5*time.Second, 200*time.Millisecond)
	if len(got) != 1 {
		t.Fatalf("%d datagrams after start, want the discovery ping", len(got))
	}
	want := bytes.Clone(blocks[39])
	binary.BigEndian.PutUint16(want[32:], port)
	if !bytes.Equal(got[0], want) {
		t.Fatalf("discovery ping\n got %x\nwant %x (capture #39, reply port %d)", got[0], want, port)
	}

	cl := query(t, d)
	if err := cl.Search([]string{"cap:b:mbox3", "cap:a:mbox1"}); err != nil {
		t.Fatal(err)
	}
	got = readSearches(rx, 5*time.Second, 200*time.Millisecond)
	if len(got) == 0 {
		t.Fatal("no search-through search")
	}
	want = bytes.Clone(blocks[3])
	binary.BigEndian.PutUint16(want[32:], port)
	// The ring's own sequence ID and CIDs (offsets of the two (CID, name) pairs).
	if binary.BigEndian.Uint32(got[0][8:]) == pva.SearchSeqFind {
		t.Fatal("search-through search with PVXS's constant sequence ID: forged replies need not see it")
	}
	copy(want[8:12], got[0][8:12])
	copy(want[41:45], got[0][41:45])
	copy(want[57:61], got[0][57:61])
	if !bytes.Equal(got[0], want) {
		t.Fatalf("search-through search\n got %x\nwant %x (capture #3, reply port %d, the ring's sequence ID and CIDs)", got[0], want, port)
	}
}

// hurryDaemon is a daemon on a fake clock whose only search destination
// is rx, with a TCP client waiting for name.
func hurryDaemon(t *testing.T, rx netip.AddrPort, name string) (*Daemon, *clock.Fake, *nsclient.Client) {
	t.Helper()
	c := testConfig(t, rx)
	c.Search.DiscoveryAtStart = false
	clk := clock.NewFake(time.Time{})
	d, err := New(c, Options{Clock: clk, TestBounds: fastAnd(func(b *Bounds) {
		b.DiscoverInterval = time.Nanosecond // the endpoint's own rate limit is not under test
	})})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	cl := query(t, d)
	if err := cl.Search([]string{name}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "ring wants the name", func() bool { return d.Ring.Stats().Initial == 1 })
	// 40 s of searching: the name is now searched every ~9 s, and the
	// clock stands still from here unless the test moves it.
	for range 40 * 5 {
		clk.Advance(200 * time.Millisecond)
	}
	return d, clk, cl
}

// fireDue runs the timers due now (a hurry-up's tick is due at once).
func fireDue(clk *clock.Fake) { clk.Advance(0) }

func postDiscover(t *testing.T, d *Daemon) {
	t.Helper()
	resp, err := http.Post("http://"+d.HTTPAddr()+"/v1/discover", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/discover: %s", resp.Status)
	}
}

// offsetOf is how many ticks away the only searching name is: a hurry-up
// searches it at the offset-th fast tick (0 = the immediate one, then one
// every 200 ms), the ordinary schedule at the offset-th second.
func offsetOf(t *testing.T, d *Daemon) int {
	t.Helper()
	for i, n := range d.Ring.Occupancy() {
		if n > 0 {
			return i
		}
	}
	t.Fatal("nothing in the ring")
	return 0
}

// stepUntilSearched moves the fake clock in 200 ms steps (after running
// what is due now) until name is searched at rx; it returns the fake time
// that took.
func stepUntilSearched(t *testing.T, clk *clock.Fake, rx *net.UDPConn, name string) time.Duration {
	t.Helper()
	start := clk.Now()
	fireDue(clk)
	for {
		if hasName(t, readSearches(rx, 20*time.Millisecond, 10*time.Millisecond), name) {
			return clk.Now().Sub(start)
		}
		if clk.Now().Sub(start) > searchring.Buckets*time.Second {
			t.Fatalf("%q not searched within a revolution", name)
		}
		clk.Advance(searchring.FastTick)
	}
}

// settleOffset moves the clock by whole ticks until the name is at least
// two ticks away, so a hurry-up (offset × 200 ms) and the ordinary
// schedule (offset × 1 s) cannot be confused.
func settleOffset(t *testing.T, d *Daemon, clk *clock.Fake, rx *net.UDPConn) int {
	t.Helper()
	for {
		if k := offsetOf(t, d); k >= 2 {
			readSearches(rx, 50*time.Millisecond, 20*time.Millisecond) // drain
			return k
		}
		clk.Advance(time.Second)
	}
}

// POST /v1/discover hurries the ring up as Context::hurryUp() does: the
// waiting name is searched at once or at its fast tick (offset × 200 ms,
// where its ordinary search is offset seconds away) — but not within 30 s
// of the last accepted hurry-up, whatever its cause.
func TestOperatorHurryUpWithHoldOff(t *testing.T) {
	rx := udpRx(t, "127.0.0.1:0")
	d, clk, _ := hurryDaemon(t, rxAddr(rx), "nobody:has:it")
	first := clk.Now()

	k := settleOffset(t, d, clk, rx)
	postDiscover(t, d)
	if took := stepUntilSearched(t, clk, rx, "nobody:has:it"); took != time.Duration(k)*searchring.FastTick {
		t.Fatalf("searched %s after POST /v1/discover, want its fast tick %s (offset %d)", took, time.Duration(k)*searchring.FastTick, k)
	}
	if count(t, d, pokes) != 1 || count(t, d, pokesIgnored) != 0 {
		t.Fatalf("pokes %d, ignored %d", count(t, d, pokes), count(t, d, pokesIgnored))
	}

	// 10 s later (the fast revolution is over): held off, the ordinary
	// schedule goes on.
	clk.Set(first.Add(10 * time.Second))
	k = settleOffset(t, d, clk, rx)
	postDiscover(t, d)
	if took := stepUntilSearched(t, clk, rx, "nobody:has:it"); took < time.Duration(k)*time.Second-searchring.Tick {
		t.Fatalf("searched %s after a held-off POST /v1/discover; offset %d means about %d s", took, k, k)
	}
	if count(t, d, pokes) != 1 || count(t, d, pokesIgnored) != 1 {
		t.Fatalf("pokes %d, ignored %d; want the second hurry-up ignored", count(t, d, pokes), count(t, d, pokesIgnored))
	}

	// 30 s after the first: accepted again.
	clk.Set(first.Add(searchring.PokeHoldoff))
	k = settleOffset(t, d, clk, rx)
	postDiscover(t, d)
	if took := stepUntilSearched(t, clk, rx, "nobody:has:it"); took != time.Duration(k)*searchring.FastTick {
		t.Fatalf("searched %s after the hold-off ended, want %s", took, time.Duration(k)*searchring.FastTick)
	}
	if count(t, d, pokes) != 2 {
		t.Fatalf("pokes %d", count(t, d, pokes))
	}
}

// End to end through the daemon, a server that cannot be listed
// restarting: it beacons (probed: unlistable, and not asked, having
// claimed nothing), then claims a name over UDP (search-through) and a
// client is pushed it; the server stops, and when it comes back at its
// endpoint with a new GUID and beacons, the probe finds it unlistable and
// pvans asks it directly (upstream.Ask) for the waiting name it claimed
// before: the client waiting again is pushed the answer, which only the
// ask can have brought (the search destination no longer answers for it).
// A PVXS server answers the ask over TCP, a pvAccessCPP one over UDP from
// its own address. Another unlistable server that holds the name but
// never claimed it to pvans is not asked: one beacon does not get a host
// the names clients wait for.
func TestRingAsksRestartedServerForNamesItClaimed(t *testing.T) {
	for _, cpp := range []bool{false, true} {
		name := map[bool]string{false: "PVXS", true: "pvAccessCPP"}[cpp]
		t.Run(name, func(t *testing.T) { askRestarted(t, cpp) })
	}
}

func askRestarted(t *testing.T, cpp bool) {
	const name = "late:search:only"
	u := newPeerUDP(t, udpRx(t, "127.0.0.1:0"))
	u.start()
	c := testConfig(t, u.addr())
	// No retry on a timer: the old server's entry, lost, would be probed
	// again at growing intervals, and a retry landing while the restarted
	// server is up (but its restart claim not yet settled) is a second
	// unlistable report and a second ask, however the test waits. Only the
	// reports the test causes are asked here.
	d := startDaemonWith(t, c, fastAnd(func(b *Bounds) { b.ProbeBackoffMin = 0 }))
	old := startPeerServerAt(t, 0, cpp, name)
	if err := old.beacon(u.conn, d.udpAddr(), 0); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 60*time.Second, "the server probed and watched", func() bool {
		s, ok := d.Registry.Server(old.GUID())
		return ok && s.ProbeState != 0 && old.site.Server(0).Accepted > 0
	})
	u.add(old)
	cl := query(t, d)
	if err := cl.Search([]string{name}); err != nil {
		t.Fatal(err)
	}
	if a := waitAnswers(t, cl, 60*time.Second); a[0].Endpoint != old.Endpoint() {
		t.Fatalf("answered %v, want %v", a[0].Endpoint, old.Endpoint())
	}
	// The answer makes pvans probe the server again (and the prober
	// retries the listing at growing intervals); a stop during a probe
	// is a failed probe, not a lost watch, so stop between probes.
	probesQuiet(t, d, 500*time.Millisecond)
	u.remove(old)
	old.stop(t)
	testutil.WaitFor(t, 60*time.Second, "the name searched again", func() bool {
		_, held := d.Registry.LookupName(name)
		return !held && count(t, d, "pvans_searchring_reentered_total") == 1
	})
	waiting := d.Resolver.Stats().Waiting
	again := query(t, d)
	if err := again.Search([]string{name}); err != nil {
		t.Fatal(err)
	}
	// The search is read on the daemon's side in its own time: an answer
	// that came before it had made a waiter would resolve the name with
	// nobody to push it to, and nothing would ask the server again.
	testutil.WaitFor(t, 60*time.Second, "the client waiting again", func() bool { return d.Resolver.Stats().Waiting > waiting })

	// A stranger holding the name, unlistable, beacons: probed, not asked.
	stranger := startPeerServerAt(t, 0, cpp, name)
	if err := stranger.beacon(u.conn, d.udpAddr(), 0); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 60*time.Second, "the stranger probed", func() bool {
		s, ok := d.Registry.Server(stranger.GUID())
		return ok && s.ProbeState != 0
	})
	if a := count(t, d, asked); a != 0 {
		t.Fatalf("%d asks: a server that never claimed the name was asked", a)
	}

	// The old server comes back at its endpoint with a new GUID.
	back := startPeerServerAt(t, old.Endpoint().Port(), cpp, name)
	first := time.Now()
	if err := back.beacon(u.conn, d.udpAddr(), 0); err != nil {
		t.Fatal(err)
	}
	ans := waitAnswers(t, again, 60*time.Second)
	t.Logf("pushed %s after the restarted server's first beacon", time.Since(first))
	if len(ans) != 1 || ans[0].Endpoint != back.Endpoint() || ans[0].GUID != back.GUID() {
		t.Fatalf("answers %+v, want %s at %v", ans, back.GUID(), back.Endpoint())
	}
	if a := count(t, d, asked); a != 1 {
		t.Fatalf("%d asks: want the restarted server asked once", a)
	}
}

// probesQuiet waits until no probe has started for quiet.
func probesQuiet(t *testing.T, d *Daemon, quiet time.Duration) {
	t.Helper()
	n, since := d.Prober.Probes(), time.Now()
	testutil.WaitFor(t, 30*time.Second, "the probes to settle", func() bool {
		if m := d.Prober.Probes(); m != n {
			n, since = m, time.Now()
		}
		return time.Since(since) >= quiet
	})
}

// The same through the ring's hurry-up alone (the server's TCP port is
// closed, so there is nothing to ask): the beacon's hurry-up searches the
// waiting name at its fast tick (offset × 200 ms, not offset seconds) and
// the client is pushed the server's answer.
func TestRingHurryUpOnFirstBeacon(t *testing.T) {
	port := testutil.FreeUDPPort(t)
	d, clk, cl := hurryDaemon(t, netip.AddrPortFrom(lo, port), "late:udp:only")
	// A server known only by UDP: its TCP port refuses connections.
	srv := &peerServer{info: sim.ServerInfo{GUID: pva.GUID{0x5E, 1}, TCP: netip.AddrPortFrom(lo, testutil.FreeTCPPort(t))},
		names: map[string]bool{"late:udp:only": true}}
	u := newPeerUDP(t, udpRx(t, netip.AddrPortFrom(lo, port).String()))
	var searched atomic.Int64 // searches naming the waiting name
	u.onSearch = func(_ netip.AddrPort, m *pva.Search) bool {
		for _, n := range m.Names {
			if string(n.Name) == "late:udp:only" {
				searched.Add(1)
			}
		}
		return true
	}
	u.add(srv)
	for {
		if k := offsetOf(t, d); k >= 2 {
			break
		}
		clk.Advance(time.Second)
	}
	k := offsetOf(t, d)
	u.start()
	start := clk.Now()
	if err := srv.beacon(u.conn, d.udpAddr(), 0); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "hurry-up", func() bool { return count(t, d, pokes) == 1 })
	var ans []nsclient.Answer
	for len(ans) == 0 {
		before := searched.Load()
		fireDue(clk)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		ans, _, _ = cl.Wait(ctx)
		cancel()
		if len(ans) == 0 && searched.Load() != before {
			// The name was searched at this tick: its answer is on its
			// way; on a loaded machine it may take longer than 50 ms.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ans, _, _ = cl.Wait(ctx)
			cancel()
		}
		if len(ans) == 0 {
			if clk.Now().Sub(start) > searchring.Buckets*searchring.FastTick {
				t.Fatal("not answered within the fast revolution")
			}
			clk.Advance(searchring.FastTick)
		}
	}
	took := clk.Now().Sub(start)
	t.Logf("offset %d: pushed at the fast tick %s after the first beacon (the ordinary schedule: %d s)", k, took, k)
	if took != time.Duration(k)*searchring.FastTick || ans[0].Endpoint != srv.Endpoint() {
		t.Fatalf("answered %+v at %s, want %v at %s", ans, took, srv.Endpoint(), time.Duration(k)*searchring.FastTick)
	}
}

// Re-entry (docs/protocol.md, "Re-entry into search"): a name the ring
// resolved and pushed is searched again as soon as its server is lost, so
// when the client comes back (its connection to the dead endpoint failed)
// another server's answer is already there.
func TestReenteredWhenPushedServerIsLost(t *testing.T) {
	u := newPeerUDP(t, udpRx(t, "127.0.0.1:0"))
	u.start()
	old := startPeerServer(t, false, "moving:pv")
	u.add(old)
	d := startDaemon(t, testConfig(t, u.addr()))
	cl := query(t, d)
	if err := cl.Search([]string{"moving:pv"}); err != nil {
		t.Fatal(err)
	}
	if a := waitAnswers(t, cl, 5*time.Second); a[0].Endpoint != old.Endpoint() {
		t.Fatalf("answered %v, want %v", a[0].Endpoint, old.Endpoint())
	}
	// The prober keeps watch on the server it heard of through the reply.
	testutil.WaitFor(t, 5*time.Second, "watch connection to the old server", func() bool {
		return old.site.Server(0).Accepted > 0
	})
	testutil.WaitFor(t, 5*time.Second, "old server probed", func() bool {
		s, ok := d.Registry.Server(old.GUID())
		return ok && s.ProbeState != 0
	})

	// The name moves: the old server stops (its claims with it), a new
	// one that only answers searches holds it.
	moved := startPeerServer(t, false, "moving:pv")
	u.add(moved)
	u.remove(old)
	old.stop(t)
	took := testutil.WaitFor(t, 10*time.Second, "re-searched and registered at the new server", func() bool {
		h, ok := d.Registry.LookupName("moving:pv")
		return ok && h.Addr == moved.Endpoint()
	})
	t.Logf("name found at its new server %s after the old one stopped", took)
	if count(t, d, "pvans_searchring_reentered_total") != 1 {
		t.Fatalf("re-entered %d, want 1", count(t, d, "pvans_searchring_reentered_total"))
	}
	// The client searches again (its pushed endpoint failed it): answered
	// with the new endpoint.
	again := query(t, d)
	if err := again.Search([]string{"moving:pv"}); err != nil {
		t.Fatal(err)
	}
	if a := waitAnswers(t, again, 5*time.Second); a[0].Endpoint != moved.Endpoint() || a[0].GUID != moved.GUID() {
		t.Fatalf("re-answered %+v, want %v", a[0], moved.Endpoint())
	}
}

// pvans's own beacons carry a change count that moves when what pvans
// answers changes (a server listed) and only then.
func TestOwnBeaconChangeCountFollowsAnswers(t *testing.T) {
	rx := udpRx(t, "127.0.0.1:0")
	c := testConfig(t)
	c.UDP.SendBeacons = true
	c.PVA.BeaconAddrList = []config.Endpoint{config.EndpointOf(rxAddr(rx))}
	clk := clock.NewFake(time.Time{})
	d, err := New(c, Options{Clock: clk, TestBounds: fast})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	count := func() uint16 {
		t.Helper()
		buf := make([]byte, 2048)
		rx.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			n, _, err := rx.ReadFromUDPAddrPort(buf)
			if err != nil {
				t.Fatal("no beacon")
			}
			h, p, _, err := pva.SplitMessage(buf[:n])
			var b pva.Beacon
			if err == nil && h.Command == pva.CmdBeacon && b.Decode(p, h.BigEndian()) == nil && b.GUID == d.GUID() {
				return b.ChangeCount
			}
		}
	}
	c0 := count() // the first beacon, at start
	srv := startPeerServer(t, true, "counted:a", "counted:b")
	if err := srv.site.Beacon(0, d.udpAddr()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "server listed", func() bool { return d.Registry.Counts().Names == 2 })
	clk.Advance(searchring.PokeHoldoff / 2) // the next beacon (15 s)
	c1 := count()
	clk.Advance(searchring.PokeHoldoff / 2)
	c2 := count()
	if c1 == c0 || c2 != c1 {
		t.Fatalf("change counts %d, %d, %d: want a move when the server was listed, then none", c0, c1, c2)
	}
}

const (
	pokes        = `pvans_searchring_pokes_total{result="accepted"}`
	pokesIgnored = `pvans_searchring_pokes_total{result="ignored"}`
	asked        = `pvans_upstream_asks_total{result="asked"}`
)
