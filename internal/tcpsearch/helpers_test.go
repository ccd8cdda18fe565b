package tcpsearch

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/testutil"
)

var (
	guidA = pva.GUID{0xA, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	guidB = pva.GUID{0xB, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	guidZ = pva.GUID{0xF, 0xF}
	guidN = pva.GUID{'p', 'v', 'a', 'n', 's'} // pvans' own
	epA   = netip.MustParseAddrPort("10.1.2.3:5075")
	epB   = netip.MustParseAddrPort("[fd00::7]:5085")
)

// world is a listener on loopback backed by the real registry and
// resolver, with server A (cap:a:mbox1, cap:a:mbox2) and server B
// (cap:b:mbox3).
type world struct {
	reg *registry.Registry
	res *resolver.Resolver
	srv *Server
	ep  netip.AddrPort
}

func newWorld(t testing.TB, opt Options) *world {
	t.Helper()
	return newWorldWith(t, opt, resolver.Options{})
}

// newWorldWith is newWorld with resolver options (the name policy).
func newWorldWith(t testing.TB, opt Options, ro resolver.Options) *world {
	t.Helper()
	reg := registry.New(registry.Options{})
	res := resolver.New(reg, ro)
	w := &world{reg: reg, res: res}
	w.addServer(t, guidA, epA, "cap:a:mbox1", "cap:a:mbox2")
	w.addServer(t, guidB, epB, "cap:b:mbox3")
	if opt.Listen == nil {
		opt.Listen = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}
	}
	opt.GUID = guidN
	w.srv = New(opt, FromResolver(res))
	if err := w.srv.Start(); err != nil {
		t.Fatal(err)
	}
	w.ep = w.srv.Addrs()[0]
	t.Cleanup(func() { w.srv.Close(); res.Close() })
	return w
}

func (w *world) addServer(t testing.TB, g pva.GUID, ep netip.AddrPort, names ...string) {
	t.Helper()
	if _, err := w.reg.UpsertServer(registry.ServerInfo{GUID: g, Addr: ep, Protocol: "tcp"}); err != nil {
		t.Fatal(err)
	}
	if len(names) > 0 {
		if err := w.reg.AddNames(g, names, registry.SourceProbe); err != nil {
			t.Fatal(err)
		}
	}
}

// client is a Go PVA client: pvaconn.Dial plus search-response decoding.
type client struct {
	c     *pvaconn.Conn
	resps chan response
	other chan pva.Header
}

type response struct {
	h pva.Header
	m pva.SearchResponse
}

func (cl *client) Message(c *pvaconn.Conn, h pva.Header, p []byte) {
	if h.Command != pva.CmdSearchResponse {
		cl.other <- h
		return
	}
	var m pva.SearchResponse
	if err := m.Decode(p, h.BigEndian()); err != nil {
		panic(err)
	}
	m.Protocol = bytes.Clone(m.Protocol)
	cl.resps <- response{h, m}
}

func dial(t testing.TB, ep netip.AddrPort) *client {
	t.Helper()
	cl := &client{resps: make(chan response, 1<<16), other: make(chan pva.Header, 100)}
	c, err := pvaconn.Dial(context.Background(), ep, pvaconn.Options{EchoInterval: 500 * time.Millisecond}, cl)
	if err != nil {
		t.Fatal(err)
	}
	cl.c = c
	t.Cleanup(func() { c.Close(); <-c.Done() })
	return cl
}

// search sends one PVXS-style search: big endian, Unicast, reply port 0.
func (cl *client) search(seq uint32, flags uint8, names ...string) {
	s := pva.Search{Seq: seq, Flags: flags | pva.SearchUnicast, Protocols: [][]byte{[]byte("tcp")}}
	for i, n := range names {
		s.Names = append(s.Names, pva.SearchName{CID: uint32(100 + i), Name: []byte(n)})
	}
	cl.c.Send(pva.AppendSearch(nil, pva.FlagBigEndian, &s))
}

func (cl *client) next(t testing.TB, within time.Duration) response {
	t.Helper()
	select {
	case r := <-cl.resps:
		return r
	case <-time.After(within):
		t.Fatalf("no search response within %v", within)
		return response{}
	}
}

func (cl *client) none(t testing.TB, within time.Duration) {
	t.Helper()
	select {
	case r := <-cl.resps:
		t.Fatalf("unexpected response %+v", r.m)
	case <-time.After(within):
	}
}

// rawConn is a hand-driven client socket that has done the handshake.
func rawConn(t testing.TB, ep netip.AddrPort) net.Conn {
	t.Helper()
	return rawConnVia(t, &net.Dialer{}, ep)
}

// rawConnFrom is rawConn from a chosen loopback source address.
func rawConnFrom(t testing.TB, ep netip.AddrPort, src netip.Addr) net.Conn {
	t.Helper()
	return rawConnVia(t, &net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 5 * time.Second}, ep)
}

func rawConnVia(t testing.TB, d *net.Dialer, ep netip.AddrPort) net.Conn {
	t.Helper()
	nc, err := d.Dial("tcp", ep.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	testutil.ReadN(t, nc, 36)
	nc.Write(pva.AppendClientValidation(nil, 0, &pva.ClientValidation{AuthMethod: "anonymous"}))
	testutil.ReadN(t, nc, 9)
	return nc
}

// readMsg reads one whole message from a raw socket.
func readMsg(t testing.TB, nc net.Conn) (pva.Header, []byte) {
	t.Helper()
	h, err := pva.DecodeHeader(testutil.ReadN(t, nc, 8))
	if err != nil {
		t.Fatal(err)
	}
	return h, testutil.ReadN(t, nc, int(h.PayloadLen()))
}

// isClosed reports whether the server closed nc within d.
func isClosed(nc net.Conn, d time.Duration) bool {
	nc.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, nc)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true // EOF, or a reset when the server left our bytes unread
}
