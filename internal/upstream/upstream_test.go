package upstream

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/tcpsearch"
)

type reply struct {
	from netip.AddrPort
	guid pva.GUID
	ep   netip.AddrPort
	cids []uint32
}

func startNameServer(t *testing.T, listen netip.AddrPort) (*tcpsearch.Server, pva.GUID, netip.AddrPort) {
	t.Helper()
	reg := registry.New(registry.Options{})
	t.Cleanup(reg.Close)
	res := resolver.New(reg, resolver.Options{})
	t.Cleanup(res.Close)
	g, ep := pva.GUID{7, 7}, netip.MustParseAddrPort("127.0.0.9:5099")
	if _, err := reg.UpsertServer(registry.ServerInfo{GUID: g, Addr: ep}); err != nil {
		t.Fatal(err)
	}
	if err := reg.ReplaceNames(g, []string{"up:pv"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	srv := tcpsearch.New(tcpsearch.Options{Listen: []netip.AddrPort{listen}}, tcpsearch.FromResolver(res))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	return srv, g, ep
}

func searchMsg(cid uint32, name string) []byte {
	s := pva.Search{Seq: pva.SearchSeqFind, Flags: pva.SearchUnicast, Protocols: [][]byte{[]byte("tcp")},
		Names: []pva.SearchName{{CID: cid, Name: []byte(name)}}}
	return pva.AppendSearch(nil, pva.FlagBigEndian, &s)
}

func waitReady(t *testing.T, ready chan netip.AddrPort, c *Conn) {
	t.Helper()
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("upstream never became ready")
	}
	if !c.Ready() {
		t.Fatal("OnReady called but Ready() false")
	}
}

// pvans chains to another name server (here the project's own TCP name
// server): searches go up, answers come back, and a lost connection is
// rebuilt by the 10 s check.
func TestChainSearchAndReconnect(t *testing.T) {
	srv, g, ep := startNameServer(t, netip.MustParseAddrPort("127.0.0.1:0"))
	addr := srv.Addrs()[0]
	fc := clock.NewFake(time.Time{})
	ready := make(chan netip.AddrPort, 4)
	replies := make(chan reply, 4)
	p := New(Options{Servers: []netip.AddrPort{addr}, Clock: fc,
		OnReady: func(a netip.AddrPort) { ready <- a },
		OnReply: func(from netip.AddrPort, m *pva.SearchResponse) {
			replies <- reply{from, m.GUID, netip.AddrPortFrom(m.Addr.Addr(), m.Port), append([]uint32(nil), m.CIDs...)}
		}})
	p.Start()
	defer p.Close()
	c := p.Conns()[0]
	waitReady(t, ready, c)

	c.Send(searchMsg(0x12345678, "up:pv"))
	select {
	case r := <-replies:
		if r.guid != g || r.ep != ep || len(r.cids) != 1 || r.cids[0] != 0x12345678 || r.from != addr {
			t.Fatalf("reply %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no reply from the upstream name server")
	}

	// The upstream goes away: not ready, and nothing is dialled until the check.
	srv.Close()
	deadline := time.Now().Add(5 * time.Second)
	for c.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("still ready after the upstream closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv2, _, _ := startNameServer(t, addr)
	defer srv2.Close()
	fc.Advance(CheckInterval)
	waitReady(t, ready, c)
	if n := c.Connects.Load(); n != 2 {
		t.Fatalf("connects = %d, want 2", n)
	}
}

// Apply (a reload): a server still listed keeps its connection, a
// removed one is disconnected, a new one is connected at once.
func TestApplyServers(t *testing.T) {
	srvA, _, _ := startNameServer(t, netip.MustParseAddrPort("127.0.0.1:0"))
	defer srvA.Close()
	srvB, _, _ := startNameServer(t, netip.MustParseAddrPort("127.0.0.1:0"))
	defer srvB.Close()
	a, b := srvA.Addrs()[0], srvB.Addrs()[0]
	ready := make(chan netip.AddrPort, 4)
	p := New(Options{Servers: []netip.AddrPort{a}, Clock: clock.NewFake(time.Time{}), OnReady: func(x netip.AddrPort) { ready <- x }})
	p.Start()
	defer p.Close()
	ca := p.Conns()[0]
	waitReady(t, ready, ca)

	p.Apply(Settings{Servers: []netip.AddrPort{a, b}, Conn: p.o.Conn})
	if cs := p.Conns(); len(cs) != 2 || cs[0] != ca || cs[1].Addr() != b {
		t.Fatalf("conns after adding b: %v", cs)
	}
	waitReady(t, ready, p.Conns()[1])
	if ca.Connects.Load() != 1 {
		t.Fatal("the kept server was reconnected")
	}

	p.Apply(Settings{Servers: []netip.AddrPort{b}, Conn: p.o.Conn})
	deadline := time.Now().Add(5 * time.Second)
	for ca.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("removed server still connected")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if cs := p.Conns(); len(cs) != 1 || cs[0].Addr() != b || !cs[0].Ready() {
		t.Fatalf("conns after removing a: %v", cs)
	}
	for srvA.Connections() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("server a still has %d connections", srvA.Connections())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
