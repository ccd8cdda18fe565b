//go:build linux

package udpsearch

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
)

var (
	guidX = pva.GUID{0xEE, 0xEE, 1}
	srvX  = resolver.Endpoint{GUID: guidX, Addr: netip.MustParseAddrPort("127.0.0.1:7000"), Protocol: "tcp"}
)

func guidsOf(t *testing.T, msgs []rxMsg) []pva.GUID {
	t.Helper()
	var gs []pva.GUID
	for _, m := range msgs {
		_, r := decodeResponse(t, m.b)
		gs = append(gs, r.GUID)
	}
	slices.SortFunc(gs, func(a, b pva.GUID) int { return slices.Compare(a[:], b[:]) })
	return gs
}

func sortedGUIDs(gs ...pva.GUID) []pva.GUID {
	slices.SortFunc(gs, func(a, b pva.GUID) int { return slices.Compare(a[:], b[:]) })
	return gs
}

// pvans and two PVXS-like servers share 5076 in a namespace; a unicast
// search to 127.0.0.1 reaches all three through forwarding, whichever
// socket the kernel hands it to, and each answers exactly once.
func TestSharedPortLoopbackForwarding(t *testing.T) {
	ns := newNetns(t)
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true,
		Resolver: newMapResolver(map[string]resolver.Endpoint{"pvans:held": srvX})})
	startPVXSLike(t, ns, 5076, guidA, 5075, "a:1")
	startPVXSLike(t, ns, 5076, guidB, 5085, "b:1")

	for i := range 6 { // different source ports hash to different sockets
		c := udpIn(t, ns, "127.0.0.1:0")
		port := c.LocalAddr().(*net.UDPAddr).AddrPort().Port()
		msg := searchMsg(pva.SearchUnicast, netip.Addr{}, port, []string{"tcp"}, "a:1", "b:1", "pvans:held", "nobody")
		if _, err := c.WriteToUDPAddrPort(msg, netip.MustParseAddrPort("127.0.0.1:5076")); err != nil {
			t.Fatal(err)
		}
		got := collect(c, 200*time.Millisecond, 3)
		if g := guidsOf(t, got); !slices.Equal(g, sortedGUIDs(guidA, guidB, guidX)) {
			t.Fatalf("search %d: answers from %v", i, g)
		}
		for _, m := range got {
			if m.from.Addr() != ipLo {
				t.Errorf("answer from %v", m.from)
			}
		}
	}
	if s.st.responses.Load() != 6 {
		t.Fatalf("pvans answered %d times, want 6 (once per search): %+v", s.st.responses.Load(), metrics.Sprint(&s.st))
	}
}

// Each safety rule, over real sockets: the offending datagram is sent and
// neither a forwarded copy (seen by an observer bound to the group) nor an
// answer appears. A valid unicast search first shows the observer and the
// client would see both if they happened.
func TestSafetyRulesOnTheWire(t *testing.T) {
	ns := newNetns(t)
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true,
		Resolver: newMapResolver(map[string]resolver.Endpoint{"pvans:held": srvX})})
	var obs *net.UDPConn
	err := ns.Do(func() (err error) {
		// Bound to the group address, so it sees group traffic only and
		// never steals a unicast from pvans.
		obs, err = listenSearchPortAt(ForwardGroup, 5076)
		return
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obs.Close() })
	client := udpIn(t, ns, "127.0.0.1:0")
	groupSender(t, client)
	cport := client.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	lo5076 := netip.MustParseAddrPort("127.0.0.1:5076")
	group := netip.AddrPortFrom(ForwardGroup, 5076)
	valid := searchMsg(pva.SearchUnicast, netip.Addr{}, cport, []string{"tcp"}, "pvans:held")
	withReply := searchMsg(pva.SearchUnicast, ipLo, cport, []string{"tcp"}, "pvans:held")
	tag := func(inner []byte) []byte {
		return append(pva.AppendOriginTag(nil, pva.FlagBigEndian, pva.AddressFrom(ipLo)), inner...)
	}

	// Positive control.
	client.WriteToUDPAddrPort(valid, lo5076)
	if got := collect(obs, 300*time.Millisecond, 0); len(got) != 1 || got[0].b[3] != byte(pva.CmdOriginTag) {
		t.Fatalf("valid unicast: observer saw %d datagrams", len(got))
	}
	if got := collect(client, 200*time.Millisecond, 0); len(got) != 1 {
		t.Fatalf("valid unicast: %d answers", len(got))
	}

	cases := []struct {
		name       string
		b          []byte
		to         netip.AddrPort
		wantGroup  int // datagrams the observer sees: our own sends to the group
		wantAnswer int
		drop       func(*counters) uint64
	}{
		{"rule 1: origin tag not addressed to the loopback group", tag(withReply), lo5076, 0, 0,
			func(c *counters) uint64 { return c.dropTagNotForwarded.Load() }},
		{"rule 2: two origin tags", tag(tag(withReply)), group, 1, 0,
			func(c *counters) uint64 { return c.dropSecondTag.Load() }},
		{"rule 3: an already forwarded search is answered, not forwarded", tag(withReply), group, 1, 1,
			func(c *counters) uint64 { return c.responses.Load() }},
		{"rule 3: even untagged with the Unicast flag", withReply, group, 1, 1,
			func(c *counters) uint64 { return c.responses.Load() }},
		{"rule 5: forwarded search with zero reply address", tag(valid), group, 1, 0,
			func(c *counters) uint64 { return c.dropForwardedZero.Load() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := c.drop(&s.st)
			fwd := s.st.forwards.Load()
			if _, err := client.WriteToUDPAddrPort(c.b, c.to); err != nil {
				t.Fatal(err)
			}
			if got := collect(obs, 300*time.Millisecond, 0); len(got) != c.wantGroup {
				t.Errorf("observer saw %d datagrams on the group, want %d (only our own)", len(got), c.wantGroup)
			}
			if got := collect(client, 100*time.Millisecond, 0); len(got) != c.wantAnswer {
				t.Errorf("%d answers, want %d", len(got), c.wantAnswer)
			}
			if c.drop(&s.st) != before+1 {
				t.Errorf("counter did not move: %+v", metrics.Sprint(&s.st))
			}
			if s.st.forwards.Load() != fwd {
				t.Error("forwarded")
			}
		})
	}

	t.Run("rule 4: multicast source", func(t *testing.T) {
		fwd, replies := s.st.forwards.Load(), s.st.responses.Load()
		received, multicast := s.st.datagrams.Load(), s.st.dropMulticastSource.Load()
		// The kernel itself refuses martian sources; either it or pvans
		// drops it, and nothing must come out.
		if err := ns.Do(func() error {
			return sendRaw(netip.MustParseAddrPort("224.1.2.3:"+strconv.Itoa(int(cport))), lo5076, withReply)
		}); err != nil {
			t.Fatal(err)
		}
		if got := collect(obs, 300*time.Millisecond, 0); len(got) != 0 {
			t.Errorf("observer saw %d datagrams", len(got))
		}
		if got := collect(client, 100*time.Millisecond, 0); len(got) != 0 {
			t.Errorf("%d answers", len(got))
		}
		if s.st.forwards.Load() != fwd || s.st.responses.Load() != replies {
			t.Errorf("forwarded or answered: %+v", metrics.Sprint(&s.st))
		}
		if s.st.datagrams.Load() != received && s.st.dropMulticastSource.Load() != multicast+1 {
			t.Errorf("received but not dropped as multicast source: %+v", metrics.Sprint(&s.st))
		}
	})
}

// listenSearchPortAt binds like listenSearchPort but to a given address.
func listenSearchPortAt(addr netip.Addr, port uint16) (*net.UDPConn, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "udp")
	defer f.Close()
	for _, o := range []int{unix.SO_REUSEADDR, unix.SO_REUSEPORT} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o, 1); err != nil {
			return nil, err
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(port), Addr: addr.As4()}); err != nil {
		return nil, err
	}
	mreq := &unix.IPMreq{Multiaddr: ForwardGroup.As4(), Interface: loopback4}
	if err := unix.SetsockoptIPMreq(fd, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, mreq); err != nil {
		return nil, err
	}
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}

// sendRaw sends one UDP datagram with a forged source through a raw socket.
func sendRaw(src, dst netip.AddrPort, payload []byte) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	n := 20 + 8 + len(payload)
	p := make([]byte, n)
	p[0], p[8], p[9] = 0x45, 1, unix.IPPROTO_UDP
	p[2], p[3] = byte(n>>8), byte(n)
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	copy(p[12:16], s4[:])
	copy(p[16:20], d4[:])
	u := p[20:]
	u[0], u[1], u[2], u[3] = byte(src.Port()>>8), byte(src.Port()), byte(dst.Port()>>8), byte(dst.Port())
	u[4], u[5] = byte((8+len(payload))>>8), byte(8+len(payload))
	copy(u[8:], payload)
	return unix.Sendto(fd, p, 0, &unix.SockaddrInet4{Addr: d4})
}

// A two-homed pvans host between a client net and a server net, all in
// namespaces: searches are answered from the address of the link they
// arrived on, with the server-net server pvans knows; broadcasts are
// answered, not forwarded.
func TestTwoHomedHost(t *testing.T) {
	host, cnet, snet := newNetns(t), newNetns(t), newNetns(t)
	veth(t, host, "10.200.1.1/24", cnet, "10.200.1.2/24")
	veth(t, host, "10.200.2.1/24", snet, "10.200.2.2/24")
	guidS := pva.GUID{0x55, 0x55}
	srvS := resolver.Endpoint{GUID: guidS, Addr: netip.MustParseAddrPort("10.200.2.2:5075"), Protocol: "tcp"}
	s := startServer(t, host, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true,
		Resolver: newMapResolver(map[string]resolver.Endpoint{"snet:pv": srvS})})
	startPVXSLike(t, host, 5076, guidA, 5075, "host:pv")

	check := func(t *testing.T, ns *netns, bind string, to netip.AddrPort, flags uint8, wantFrom netip.Addr) {
		c := udpIn(t, ns, bind)
		setSockInt(t, c, unix.SOL_SOCKET, unix.SO_BROADCAST, 1)
		port := c.LocalAddr().(*net.UDPAddr).AddrPort().Port()
		msg := searchMsg(flags, netip.Addr{}, port, []string{"tcp"}, "snet:pv", "host:pv")
		if _, err := c.WriteToUDPAddrPort(msg, to); err != nil {
			t.Fatal(err)
		}
		got := collect(c, 500*time.Millisecond, 2)
		if g := guidsOf(t, got); !slices.Equal(g, sortedGUIDs(guidA, guidS)) {
			t.Fatalf("answers from %v", g)
		}
		for _, m := range got {
			if m.from != netip.AddrPortFrom(wantFrom, 5076) {
				t.Errorf("answer came from %v, want %v:5076", m.from, wantFrom)
			}
			if _, r := decodeResponse(t, m.b); r.GUID == guidS && (r.Addr.Addr() != srvS.Addr.Addr() || r.Port != 5075) {
				t.Errorf("server-net answer names %v:%d", r.Addr, r.Port)
			}
		}
	}
	t.Run("unicast on the client link", func(t *testing.T) {
		check(t, cnet, "10.200.1.2:0", netip.MustParseAddrPort("10.200.1.1:5076"), pva.SearchUnicast, netip.MustParseAddr("10.200.1.1"))
	})
	t.Run("unicast on the server link", func(t *testing.T) {
		check(t, snet, "10.200.2.2:0", netip.MustParseAddrPort("10.200.2.1:5076"), pva.SearchUnicast, netip.MustParseAddr("10.200.2.1"))
	})
	t.Run("unicast from a local process to the client-link address", func(t *testing.T) {
		check(t, host, "0.0.0.0:0", netip.MustParseAddrPort("10.200.1.1:5076"), pva.SearchUnicast, netip.MustParseAddr("10.200.1.1"))
	})
	t.Run("broadcast on the client link is not forwarded", func(t *testing.T) {
		fwd := s.st.forwards.Load()
		check(t, cnet, "0.0.0.0:0", netip.MustParseAddrPort("10.200.1.255:5076"), 0, netip.MustParseAddr("10.200.1.1"))
		if s.st.forwards.Load() != fwd {
			t.Fatal("broadcast search was forwarded")
		}
	})
}

// floodDuration: ≤ 3 s by default, 0.5 s with -short, PVANS_FLOOD_SECONDS
// overrides (10 for the full soak).
func floodDuration() time.Duration {
	if v, err := strconv.ParseFloat(os.Getenv("PVANS_FLOOD_SECONDS"), 64); err == nil && v > 0 {
		return time.Duration(v * float64(time.Second))
	}
	if testing.Short() {
		return 500 * time.Millisecond
	}
	return 2 * time.Second
}

// randomDatagram is malformed (or odd) more often than not.
func randomDatagram(r *rand.Rand, valid []byte) []byte {
	switch r.IntN(6) {
	case 0: // noise
		b := make([]byte, r.IntN(1500))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	case 1: // truncated valid search
		return valid[:r.IntN(len(valid))]
	case 2: // valid search with random bytes flipped
		b := slices.Clone(valid)
		for range 1 + r.IntN(4) {
			b[r.IntN(len(b))] = byte(r.Uint32())
		}
		return b
	case 3: // a header claiming a huge payload
		return []byte{0xCA, 2, 0x80, 3, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3}
	case 4: // tag + search sent by unicast (must be refused)
		return append(pva.AppendOriginTag(nil, pva.FlagBigEndian, pva.AddressFrom(ipLo)), valid...)
	default: // a search with a count far beyond the payload
		b := slices.Clone(valid)
		b[len(b)-1] = 0xFF
		return append(b[:41], 0xFF, 0xFF)
	}
}

func TestFloodOfMalformedDatagrams(t *testing.T) {
	ns := newNetns(t)
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true,
		Resolver: newMapResolver(map[string]resolver.Endpoint{"pvans:held": srvX})})
	flooder := udpIn(t, ns, "127.0.0.1:0")
	client := udpIn(t, ns, "127.0.0.1:0")
	port := client.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	valid := searchMsg(pva.SearchUnicast, netip.Addr{}, port, []string{"tcp"}, "pvans:held")
	r := rand.New(rand.NewPCG(1, 2))
	to := netip.MustParseAddrPort("127.0.0.1:5076")
	end := time.Now().Add(floodDuration())
	sent := 0
	for time.Now().Before(end) {
		for range 64 {
			flooder.WriteToUDPAddrPort(randomDatagram(r, valid), to)
			sent++
		}
	}
	// The daemon still answers: give it a few tries while it drains.
	answered := false
	for try := 0; try < 10 && !answered; try++ {
		client.WriteToUDPAddrPort(valid, to)
		for _, m := range collect(client, 300*time.Millisecond, 0) {
			if _, rsp := decodeResponse(t, m.b); rsp.GUID == guidX {
				answered = true
			}
		}
	}
	t.Logf("sent %d, stats %+v", sent, metrics.Sprint(&s.st))
	if !answered {
		t.Fatal("no answer to a valid search after the flood")
	}
	if s.st.dropMalformed.Load() == 0 || s.st.dropTagNotForwarded.Load() == 0 {
		t.Fatalf("flood not seen: %+v", metrics.Sprint(&s.st))
	}
}

// Own beacons leave from an ephemeral port on the PVXS schedule, with the
// change count moved by BumpChangeCount.
func TestOwnBeaconsOnTheWire(t *testing.T) {
	ns := newNetns(t)
	rx := udpIn(t, ns, "127.0.0.1:0")
	clk := clock.NewFake(time.Time{})
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, Clock: clk, SendBeacons: true,
		BeaconAddrList: Unicast(rx.LocalAddr().(*net.UDPAddr).AddrPort()), InterfaceRefresh: -1})
	read := func() (pva.Beacon, netip.AddrPort) {
		t.Helper()
		got := collect(rx, 300*time.Millisecond, 1)
		if len(got) != 1 {
			t.Fatalf("%d beacons", len(got))
		}
		h, p, _, err := pva.SplitMessage(got[0].b)
		var b pva.Beacon
		if err != nil || h.Command != pva.CmdBeacon || h.Flags != pva.FlagBigEndian|pva.FlagServer || b.Decode(p, true) != nil {
			t.Fatalf("not a beacon: %x", got[0].b)
		}
		return b, got[0].from
	}
	b, from := read()
	if b.GUID != ownGUID || b.Port != 5075 || b.Protocol != "tcp" || b.Sequence != 0 || b.ChangeCount != 0 {
		t.Fatalf("first beacon %+v", b)
	}
	if from.Port() == 5076 || from.Port() == s.ClientAddr().Port() {
		t.Fatalf("beacon sent from %v: want its own ephemeral port", from)
	}
	s.BumpChangeCount()
	clk.Advance(15 * time.Second)
	if b, _ = read(); b.Sequence != 1 || b.ChangeCount != 1 {
		t.Fatalf("second beacon %+v", b)
	}
}

// The client socket: a discovery ping goes to AddrList from an ephemeral
// port; the PVXS-like server's found=0 reply reaches the tracker, and a
// search-through search's answer reaches the callback.
func TestClientSocket(t *testing.T) {
	ns := newNetns(t)
	sink := &obsSink{}
	got := make(chan pva.GUID, 16)
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, Beacons: sink,
		AddrList: Unicast(netip.MustParseAddrPort("127.0.0.1:5076")),
		OnSearchResponse: func(_ netip.AddrPort, m *pva.SearchResponse) {
			if m.Found {
				got <- m.GUID
			}
		}})
	startPVXSLike(t, ns, 5076, guidA, 5075, "a:1")
	port := s.ClientAddr().Port()
	if port == 5076 || port == 0 {
		t.Fatalf("client port %d", port)
	}
	if err := s.SendSearch(searchMsg(pva.SearchMustReply|pva.SearchUnicast, netip.Addr{}, port, nil), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SendSearch(searchMsg(pva.SearchUnicast, netip.Addr{}, port, []string{"tcp"}, "a:1"), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		if g != guidA {
			t.Fatalf("search-through answer from %v", g)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no search-through answer")
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(sink.all()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	obs := sink.all()
	if len(obs) != 1 || obs[0].GUID != guidA || obs[0].Via != beacon.ViaDiscovery || obs[0].Endpoint != netip.MustParseAddrPort("127.0.0.1:5075") {
		t.Fatalf("observations %+v (pvans's own pong must not be one)", obs)
	}
	if s.st.clientSearches.Load() != 2 || s.st.discoveryPongs.Load() != 1 {
		t.Fatalf("stats %+v", metrics.Sprint(&s.st))
	}
	// Every server answers a discovery ping at once: the client socket
	// gets the same large receive buffer as the search port.
	rc, err := s.fam[ip4].client.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var size int
	var gerr error
	_ = rc.Control(func(fd uintptr) { size, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) })
	if want := int(config.Defaults().UDP.ReceiveBufferBytes); gerr != nil || size < want {
		t.Fatalf("client socket SO_RCVBUF = %d (%v), want the production %d (startServer passes it)", size, gerr, want)
	}
}

// The receive path (recvmmsg, control messages, handler) allocates
// nothing per datagram for names pvans does not hold.
func TestReceivePathAllocatesNothing(t *testing.T) {
	ns := newNetns(t)
	var conn *net.UDPConn
	if err := ns.Do(func() (err error) { conn, err = listenSearchPort(5076, 1<<20); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := udpIn(t, ns, "127.0.0.1:0")
	ifs, err := ns.interfaces()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{AnswerNames: true, Resolver: captureRegistry()}
	o.setDefaults()
	st := &counters{}
	var tab atomic.Pointer[ifaceTable]
	tab.Store(newIfaceTable(ifs))
	out := &recSender{}
	h := newHandler(&o, st, &tab, out)
	rc, _ := conn.SyscallConn()
	rb := newRxBatch(4, maxDatagram)
	var d datagram
	var drops uint32
	var have bool
	// The daemon's receive loop (serve), in its own goroutine as in the
	// daemon; AllocsPerRun counts every goroutine's allocations.
	handled := make(chan struct{}, 1)
	served := make(chan error, 1)
	go func() {
		served <- rb.serve(rc, func(k int) {
			for i := 0; i < k; i++ {
				if rb.fill(i, &d, &drops, &have) {
					h.handle(&d)
				}
			}
			handled <- struct{}{}
		})
	}()
	// Sent to the group so the handler answers (silently) rather than
	// forwarding: the not-held path.
	groupSender(t, client)
	msg := searchMsg(0, ipLo, 40000, []string{"tcp"}, "x:1", "x:2", "x:3")
	to := netip.AddrPortFrom(ForwardGroup, 5076)
	allocs := testing.AllocsPerRun(200, func() {
		client.WriteToUDPAddrPort(msg, to)
		<-handled
	})
	conn.Close()
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("receive loop ended with %v", err)
	}
	if st.searches.Load() < 200 || st.searchNames.Load() < 600 || len(out.replies)+len(out.forwards) != 0 {
		t.Fatalf("datagrams not handled as expected: %+v", metrics.Sprint(st))
	}
	if d.dst != ForwardGroup || d.ifIndex != 1 {
		t.Fatalf("IP_PKTINFO not read: dst %v if %d", d.dst, d.ifIndex)
	}
	// The send is part of the measured loop; it must not allocate either.
	if allocs != 0 {
		t.Fatalf("%.1f allocations per datagram", allocs)
	}
}
