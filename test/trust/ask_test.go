//go:build linux

package trust

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/testutil"
)

// namingServer is a hostile PVA server: it refuses the `server` channel
// (so pvans cannot list it) and answers every TCP search, for every name,
// naming the endpoint other instead of itself.
type namingServer struct {
	guid     pva.GUID
	other    netip.AddrPort
	honest   atomic.Bool  // name itself instead (until it turns)
	searches atomic.Int32 // CMD_SEARCH messages with names received
	mu       sync.Mutex   // guid, conns
	conns    []*pvaconn.Conn
}

// serve accepts connections on ln until it is closed.
func (s *namingServer) serve(ln net.Listener) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		c := pvaconn.Serve(nc, pvaconn.Options{MaxMessage: 1 << 20, SendQueueBytes: 1 << 20,
			HandshakeTimeout: 5 * time.Second, MessageTimeout: 5 * time.Second}, s)
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
	}
}

// drop closes every connection made to the server so far.
func (s *namingServer) drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

func (s *namingServer) Message(c *pvaconn.Conn, h pva.Header, payload []byte) {
	switch h.Command {
	case pva.CmdCreateChannel:
		var m pva.CreateChannel
		if m.Decode(payload, h.BigEndian()) != nil {
			c.Close()
			return
		}
		for _, rq := range m.Channels {
			_ = c.Send(pva.AppendCreateChannelReply(nil, c.Flags(), &pva.CreateChannelReply{CID: rq.CID, SID: pva.RefusedSID,
				Status: pva.Status{Type: pva.StatusFatal, Message: "no listing here"}}))
		}
	case pva.CmdSearch:
		var m pva.Search
		if m.Decode(payload, h.BigEndian()) != nil {
			c.Close()
			return
		}
		s.mu.Lock()
		g := s.guid
		s.mu.Unlock()
		r := pva.SearchResponse{GUID: g, Seq: m.Seq, Addr: pva.AddressFrom(s.other.Addr()), Port: s.other.Port(), Protocol: []byte("tcp")}
		if s.honest.Load() {
			r.Addr, r.Port = pva.AnyIPv4, 0
		}
		for _, n := range m.Names {
			r.CIDs = append(r.CIDs, n.CID)
		}
		if len(r.CIDs) > 0 {
			s.searches.Add(1)
		}
		r.Found = len(r.CIDs) > 0
		_ = c.Send(pva.AppendSearchResponse(nil, c.Flags(), &r))
	}
}

// connCounter listens at ep in namespace ns and counts the connections
// made to it.
func connCounter(t *testing.T, ns *testutil.Netns, ep netip.AddrPort) *atomic.Int32 {
	t.Helper()
	var n atomic.Int32
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", ep.String()); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return &n
}

// namingAt starts a namingServer on the attacker's address naming other,
// honest at first if honest is set, and returns its endpoint.
func (tp *topo) namingAt(t *testing.T, other netip.AddrPort, honest bool) (*namingServer, netip.AddrPort) {
	t.Helper()
	s := &namingServer{guid: forgedGUID, other: other}
	s.honest.Store(honest)
	var ln net.Listener
	if err := tp.s.Do(func() (err error) { ln, err = net.Listen("tcp", netip.AddrPortFrom(evilAddr, 0).String()); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go s.serve(ln)
	return s, ln.Addr().(*net.TCPAddr).AddrPort()
}

// An unlistable server may name only itself. One host beacons once from
// its own address and runs a server that refuses the `server` channel and
// answers any TCP search naming a third host's endpoint. A client is
// waiting for a name; pvans must not tell the server which names clients
// wait for (it never claimed one), push the client the third endpoint or
// connect there (a port scanner with an oracle).
func TestUnlistableServerNamingThirdAddress(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	third := netip.AddrPortFrom(iocAddr, 7011) // inside the server allow list
	connects := connCounter(t, tp.s, third)
	tp.start(t, "--search-through", "--addr-list", netip.AddrPortFrom(cppAddr, 5076).String())
	evil, evilEP := tp.namingAt(t, third, false)

	type result struct {
		ans map[string]nsclient.Answer
		err error
	}
	done := make(chan result, 1)
	go func() {
		a, err := tp.pv.Query([]string{"victim:pv"}, 8*time.Second)
		done <- result{a, err}
	}()
	tp.waitMetric(t, "pvans_searchring_channels", 1) // the client is waiting
	tp.send(t, netip.AddrPortFrom(evilAddr, 0), pvansUDP, beaconMsg(forgedGUID, pva.AnyIPv4, evilEP.Port(), "tcp"))
	waitUnlistable(t, tp, evilEP)

	r := <-done
	if a, ok := r.ans["victim:pv"]; ok {
		t.Errorf("the waiting client was pushed %s at %s, named by an unlistable server for another host", a.GUID, a.Endpoint)
	}
	time.Sleep(time.Second) // a probe of the named endpoint would have run by now
	if n := connects.Load(); n != 0 {
		t.Errorf("pvans connected %d times to the endpoint only the unlistable server named", n)
	}
	if h := tp.holder(t, "victim:pv"); h != "" {
		t.Errorf("victim:pv registered (holder %s)", h)
	}
	// It never claimed the name: it is not told what clients wait for.
	if n := evil.searches.Load(); n != 0 {
		t.Errorf("the unlistable server, which never claimed a name, was sent %d searches with the waiting names", n)
	}
}

// probesQuiet waits until series has not moved for quiet.
func (tp *topo) probesQuiet(t *testing.T, series string, quiet time.Duration) {
	t.Helper()
	n, since := tp.metric(t, series), time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			t.Fatalf("%s still moving after 30 s", series)
		}
		time.Sleep(50 * time.Millisecond)
		if m := tp.metric(t, series); m != n {
			n, since = m, time.Now()
		}
	}
}

// waitUnlistable waits until pvans has probed ep and found it
// unlistable.
func waitUnlistable(t *testing.T, tp *topo, ep netip.AddrPort) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range tp.servers(t) {
			if s.Endpoint == ep.String() && s.ProbeError == "unlistable" {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s not found unlistable: %+v", ep, tp.servers(t))
}

// An asked server may name only itself. A host answers pvans's
// search-through over UDP for a name, for itself (so it has claimed the
// name and will be asked about it), then drops its connections and comes
// back with a new GUID: its beacon's probe finds it unlistable and pvans
// asks it about the name, now waiting again; it answers over TCP naming a
// third host's endpoint. The answer is dropped and counted: the waiting
// client is not pushed the third endpoint and pvans does not connect there.
func TestAskedServerNamingThirdAddress(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	third := netip.AddrPortFrom(iocAddr, 7011)
	connects := connCounter(t, tp.s, third)
	evil, evilEP := tp.namingAt(t, third, true)
	tp.start(t, "--search-through", "--addr-list", netip.AddrPortFrom(evilAddr, 5076).String())

	// The host's UDP side answers pvans's first search for the name, for
	// itself, then never again.
	sniff := tp.searchListenerAt(t, netip.AddrPortFrom(evilAddr, 5076))
	done := make(chan map[string]nsclient.Answer, 1)
	go func() {
		a, _ := tp.pv.Query([]string{"victim:pv"}, 8*time.Second)
		done <- a
	}()
	replyTo, seq, cid := nextSearch(t, sniff, "victim:pv")
	tp.send(t, netip.AddrPortFrom(evilAddr, 0), replyTo, replyMsg(forgedGUID, seq, evilEP.Port(), cid))
	if a := <-done; a["victim:pv"].Endpoint != evilEP {
		t.Fatalf("first answer %+v, want the host's own %v", a, evilEP)
	}
	waitUnlistable(t, tp, evilEP)
	sniff.Close()
	// The answer makes pvans probe the host again (and retry the listing
	// at growing intervals); connections dropped during a probe fail it
	// rather than end the watch, so drop them between probes.
	tp.probesQuiet(t, `pvans_probe_total{result="refused"}`, 500*time.Millisecond)

	// It drops its connections (pvans searches the name again) and comes
	// back under a new GUID, now lying.
	evil.honest.Store(false)
	evil.drop()
	tp.waitMetric(t, "pvans_searchring_reentered_total", 1)
	go func() {
		a, _ := tp.pv.Query([]string{"victim:pv"}, 6*time.Second)
		done <- a
	}()
	tp.waitMetric(t, "pvans_resolver_waiters", 1)
	g2 := pva.GUID{0xEE, 0xEE, 0xEE, 0xEE, 9, 9, 9, 9, 9, 9, 9, 9}
	evil.mu.Lock()
	evil.guid = g2
	evil.mu.Unlock()
	tp.send(t, netip.AddrPortFrom(evilAddr, 0), pvansUDP, beaconMsg(g2, pva.AnyIPv4, evilEP.Port(), "tcp"))
	tp.waitMetric(t, `pvans_upstream_asks_total{result="asked"}`, 1)
	if a, ok := (<-done)["victim:pv"]; ok {
		t.Errorf("the waiting client was pushed %s at %s, named by an asked server for another host", a.GUID, a.Endpoint)
	}
	time.Sleep(time.Second)
	if n := connects.Load(); n != 0 {
		t.Errorf("pvans connected %d times to the endpoint only the asked server named", n)
	}
	tp.waitMetric(t, `pvans_hints_dropped_total{reason="tcp_third_party"}`, 1)
}
