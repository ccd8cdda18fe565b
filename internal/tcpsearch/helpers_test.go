package tcpsearch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/resolver"
)

// captureBlocks reads the numbered hex blocks of the PVXS loopback capture.
func captureBlocks(t testing.TB) map[int][]byte {
	t.Helper()
	f, err := os.Open("../../../shared/spec/captures/pvxs-1.5.2-loopback.txt")
	if err != nil {
		t.Skipf("capture not available: %v", err)
	}
	defer f.Close()
	out := map[int][]byte{}
	cur := -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			n, err := strconv.Atoi(strings.Fields(line)[0][1:])
			if err != nil {
				t.Fatal(err)
			}
			cur = n
			continue
		}
		fs := strings.Fields(line)
		if cur < 0 || len(fs) < 2 || len(fs[0]) != 4 {
			continue
		}
		for _, h := range fs[1:] {
			b, err := hex.DecodeString(h)
			if len(h) != 2 || err != nil {
				break
			}
			out[cur] = append(out[cur], b...)
		}
	}
	return out
}

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
	reg := registry.New(registry.Options{})
	res := resolver.New(reg, resolver.Options{})
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
	nc, err := net.Dial("tcp", ep.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	mustRead(t, nc, 36)
	nc.Write(pva.AppendClientValidation(nil, 0, &pva.ClientValidation{AuthMethod: "anonymous"}))
	mustRead(t, nc, 9)
	return nc
}

func mustRead(t testing.TB, nc net.Conn, n int) []byte {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(nc, b); err != nil {
		t.Fatalf("read %d: %v", n, err)
	}
	return b
}

// readMsg reads one whole message from a raw socket.
func readMsg(t testing.TB, nc net.Conn) (pva.Header, []byte) {
	t.Helper()
	h, err := pva.DecodeHeader(mustRead(t, nc, 8))
	if err != nil {
		t.Fatal(err)
	}
	return h, mustRead(t, nc, int(h.PayloadLen()))
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

func checkGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > base {
			buf := make([]byte, 1<<20)
			t.Errorf("goroutines: %d at start, %d at end\n%s", base, n, buf[:runtime.Stack(buf, true)])
		}
	})
}
