package upstream

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
)

// askedServer is a PVA server that records the searches it is sent and
// claims the names it holds, over the connection (as PVXS does); it
// greets in little or big endian.
type askedServer struct {
	ln    net.Listener
	guid  pva.GUID
	hold  map[string]bool
	mu    sync.Mutex
	flags []uint8 // header flags of each search received
	got   []pva.Search
	conns int
}

func startAsked(t *testing.T, bigEndian bool, hold ...string) *askedServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &askedServer{ln: ln, guid: pva.GUID{0xA5, 1}, hold: map[string]bool{}}
	for _, n := range hold {
		s.hold[n] = true
	}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
			pvaconn.Serve(nc, pvaconn.Options{Role: pvaconn.Server, BigEndian: bigEndian, MaxMessage: 1 << 20,
				SendQueueBytes: 1 << 20, HandshakeTimeout: 5 * time.Second, MessageTimeout: 5 * time.Second}, s)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

func (s *askedServer) addr() netip.AddrPort { return s.ln.Addr().(*net.TCPAddr).AddrPort() }

func (s *askedServer) Message(c *pvaconn.Conn, h pva.Header, payload []byte) {
	if h.Command != pva.CmdSearch {
		return
	}
	var m pva.Search
	if err := m.Decode(payload, h.BigEndian()); err != nil {
		c.Close()
		return
	}
	var cids []uint32
	cp := pva.Search{Seq: m.Seq, Flags: m.Flags, ReplyPort: m.ReplyPort}
	for _, p := range m.Protocols {
		cp.Protocols = append(cp.Protocols, append([]byte(nil), p...))
	}
	for _, n := range m.Names {
		cp.Names = append(cp.Names, pva.SearchName{CID: n.CID, Name: append([]byte(nil), n.Name...)})
		if s.hold[string(n.Name)] {
			cids = append(cids, n.CID)
		}
	}
	s.mu.Lock()
	s.flags = append(s.flags, h.Flags)
	s.got = append(s.got, cp)
	s.mu.Unlock()
	if len(cids) > 0 {
		c.Send(pva.AppendSearchResponse(nil, c.Flags(), &pva.SearchResponse{GUID: s.guid, Seq: m.Seq,
			Addr: pva.AnyIPv4, Port: 0, Protocol: []byte("tcp"), Found: true, CIDs: cids}))
	}
}

// Ask puts the names to one server on a connection of its own, in the byte
// order the server announced (pvAccessCPP reads a whole connection in
// that order), with the reply port given (where a pvAccessCPP server
// answers TCP searches), and hands the claims to OnAskReply: never to
// OnReply, whose name servers may speak for any endpoint.
func TestAskOneServer(t *testing.T) {
	for _, be := range []bool{false, true} {
		srv := startAsked(t, be, "held:1", "held:2")
		replies := make(chan reply, 4)
		p := New(Options{OnAskReply: func(from netip.AddrPort, m *pva.SearchResponse) {
			replies <- reply{from: from, guid: m.GUID, cids: append([]uint32(nil), m.CIDs...)}
		}, OnReply: func(netip.AddrPort, *pva.SearchResponse) {
			t.Error("an asked server's answer was handed on as a name server's")
		}})
		names := []pva.SearchName{{CID: 7, Name: []byte("held:1")}, {CID: 8, Name: []byte("other")}, {CID: 9, Name: []byte("held:2")}}
		if !p.Ask(srv.addr(), pva.SearchSeqFind, names, nil, 0xBEEF) {
			t.Fatal("Ask refused")
		}
		select {
		case r := <-replies:
			if r.from != srv.addr() || r.guid != srv.guid || len(r.cids) != 2 || r.cids[0] != 7 || r.cids[1] != 9 {
				t.Fatalf("reply %+v", r)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no answer")
		}
		srv.mu.Lock()
		if len(srv.got) != 1 || (srv.flags[0]&pva.FlagBigEndian != 0) != be || srv.got[0].ReplyPort != 0xBEEF ||
			srv.got[0].Flags != pva.SearchUnicast || len(srv.got[0].Names) != 3 {
			t.Errorf("big endian %v: server got flags %#x, %+v", be, srv.flags, srv.got)
		}
		srv.mu.Unlock()
		p.Close()
		if p.asks.asked.Load() != 1 || p.asks.refused.Load() != 0 {
			t.Fatalf("asked %d, refused %d; want 1 and 0", p.asks.asked.Load(), p.asks.refused.Load())
		}
	}
}

// TLS clients' names are asked in searches offering TLS, ["tls","tcp"],
// as the ring searches them, the others in plain ones (issue 39, row 12):
// asked plainly, a Secure PVAccess server answers "tcp", which means "no
// TLS here", and TLS clients were pushed its plaintext endpoint.
func TestAskTLSNamesOfferTLS(t *testing.T) {
	srv := startAsked(t, false, "x")
	p := New(Options{OnAskReply: func(netip.AddrPort, *pva.SearchResponse) {}})
	defer p.Close()
	plain := []pva.SearchName{{CID: 1, Name: []byte("x")}}
	secure := []pva.SearchName{{CID: 2, Name: []byte("x")}, {CID: 3, Name: []byte("y")}}
	if !p.Ask(srv.addr(), 77, plain, secure, 1) {
		t.Fatal("Ask refused")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		srv.mu.Lock()
		got := append([]pva.Search(nil), srv.got...)
		srv.mu.Unlock()
		if len(got) == 2 {
			for _, m := range got {
				var protos []string
				for _, p := range m.Protocols {
					protos = append(protos, string(p))
				}
				want := []string{"tcp"}
				if m.Names[0].CID != 1 {
					want = []string{"tls", "tcp"}
				}
				if m.Seq != 77 || !slices.Equal(protos, want) {
					t.Errorf("search seq %d for CIDs %v offered %q, want %q", m.Seq, m.Names, protos, want)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server got %d searches, want a plain one and a TLS one", len(got))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Many names are split into messages of at most about 16 KiB; at most
// MaxAsks servers are asked at once.
func TestAskBounds(t *testing.T) {
	srv := startAsked(t, false)
	p := New(Options{})
	defer p.Close()
	var names []pva.SearchName
	for i := range 3000 {
		names = append(names, pva.SearchName{CID: uint32(i), Name: []byte("a:fairly:long:process:variable:name:" + string(rune('a'+i%26)))})
	}
	if !p.Ask(srv.addr(), pva.SearchSeqFind, names, nil, 1) {
		t.Fatal("Ask refused")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		srv.mu.Lock()
		n := 0
		for _, g := range srv.got {
			n += len(g.Names)
		}
		msgs := len(srv.got)
		srv.mu.Unlock()
		if n == len(names) {
			if msgs < 3000*45/askChunk {
				t.Fatalf("%d names in %d messages", n, msgs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server got %d of %d names", n, len(names))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A listener that never completes the handshake holds each ask for
	// AskWait: the 17th is refused.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	to := mute.Addr().(*net.TCPAddr).AddrPort()
	for i := 0; i < MaxAsks-1; i++ { // one may still be running
		p.Ask(to, pva.SearchSeqFind, names[:1], nil, 1)
	}
	first := p.Ask(to, pva.SearchSeqFind, names[:1], nil, 1)
	second := p.Ask(to, pva.SearchSeqFind, names[:1], nil, 1)
	if first && second {
		t.Fatal("more than MaxAsks asks at once")
	}
	if p.asks.refused.Load() == 0 {
		t.Fatal("refusal not counted")
	}
}
