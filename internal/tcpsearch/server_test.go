package tcpsearch

import (
	"bytes"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/testutil"
)

// A Go PVA client (pvaconn.Dial) searches over TCP: one response per
// claiming server, with that server's GUID and real endpoint, in the
// connection's byte order with the server flag; unknown names unanswered.
func TestSearchGroupsPerServer(t *testing.T) {
	testutil.CheckGoroutines(t)
	w := newWorld(t, Options{})
	cl := dial(t, w.ep)
	cl.search(77, 0, "cap:a:mbox1", "nope", "cap:b:mbox3", "cap:a:mbox2")
	got := map[pva.GUID]response{}
	for i := 0; i < 2; i++ {
		r := cl.next(t, 5*time.Second)
		got[r.m.GUID] = r
	}
	cl.none(t, 100*time.Millisecond)
	a, b := got[guidA], got[guidB]
	for _, r := range []response{a, b} {
		if r.h.Flags != pva.FlagServer || r.m.Seq != 77 || !r.m.Found || string(r.m.Protocol) != "tcp" {
			t.Errorf("response %+v flags %#x", r.m, r.h.Flags)
		}
	}
	if a.m.Addr.Addr() != epA.Addr() || a.m.Port != epA.Port() || a.m.Addr != pva.AddressFrom(epA.Addr()) ||
		!equalCIDs(a.m.CIDs, 100, 103) {
		t.Errorf("server A reply: %v:%d %v", a.m.Addr, a.m.Port, a.m.CIDs)
	}
	if a.m.Addr[10] != 0xFF || a.m.Addr[11] != 0xFF {
		t.Errorf("IPv4 not sent IPv4-mapped: %x", a.m.Addr)
	}
	if b.m.Addr.Addr() != epB.Addr() || b.m.Port != epB.Port() || !equalCIDs(b.m.CIDs, 102) {
		t.Errorf("server B reply: %v:%d %v", b.m.Addr, b.m.Port, b.m.CIDs)
	}
	if w.srv.cnt.searches.Load() != 1 || w.srv.cnt.names.Load() != 4 || w.srv.cnt.claims.Load() != 3 || w.srv.cnt.responses.Load() != 2 || w.srv.cnt.negative.Load() != 0 {
		t.Errorf("stats %+v", metrics.Sprint(&w.srv.cnt))
	}
}

func equalCIDs(got []uint32, want ...uint32) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// Raw bytes captured from pvxget (blocks #27-#30) replayed at the daemon:
// the greeting and validation match PVXS byte for byte, and the answer to
// the captured search decodes to the registered endpoint and GUID.
func TestCapturedClientReplay(t *testing.T) {
	testutil.CheckGoroutines(t)
	cap := testutil.CaptureBlocks(t)
	w := newWorld(t, Options{})
	nc, err := net.Dial("tcp", w.ep.String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := testutil.ReadN(t, nc, len(cap[27])); !bytes.Equal(got, cap[27]) {
		t.Fatalf("greeting\n got %x\nwant %x", got, cap[27])
	}
	nc.Write(cap[28])
	if got := testutil.ReadN(t, nc, len(cap[29])); !bytes.Equal(got, cap[29]) {
		t.Fatalf("validated\n got %x\nwant %x", got, cap[29])
	}
	nc.Write(cap[30])
	h, p := readMsg(t, nc)
	var m pva.SearchResponse
	if err := m.Decode(p, h.BigEndian()); err != nil {
		t.Fatal(err)
	}
	if h.Command != pva.CmdSearchResponse || h.Flags != pva.FlagServer {
		t.Fatalf("header %+v", h)
	}
	if m.GUID != guidA || m.Addr.Addr() != epA.Addr() || m.Port != epA.Port() || m.Seq != pva.SearchSeqFind ||
		!m.Found || !equalCIDs(m.CIDs, 0x12345678) || string(m.Protocol) != "tcp" {
		t.Fatalf("reply %+v", m)
	}
	// Same layout as PVXS's own reply (#31) apart from GUID, address, port.
	want := bytes.Clone(cap[31])
	copy(want[8:20], guidA[:])
	mapped := pva.AddressFrom(epA.Addr())
	copy(want[24:40], mapped[:])
	want[40], want[41] = byte(epA.Port()), byte(epA.Port()>>8)
	if got := pva.AppendSearchResponse(nil, h.Flags, &m); !bytes.Equal(got, want) {
		t.Fatalf("reply bytes\n got %x\nwant %x", got, want)
	}
}

// MustReply with nothing found, and a discovery ping, get found=0 with no
// CIDs; without MustReply nothing is sent.
func TestNegativeReplies(t *testing.T) {
	w := newWorld(t, Options{})
	cl := dial(t, w.ep)
	cl.search(1, 0, "nope")
	cl.search(2, pva.SearchMustReply, "nope", "nada")
	r := cl.next(t, 5*time.Second)
	if r.m.Seq != 2 || r.m.Found || len(r.m.CIDs) != 0 || r.m.GUID != guidN || r.m.Port != w.ep.Port() {
		t.Errorf("negative reply %+v", r.m)
	}
	ping := pva.Search{Seq: pva.SearchSeqFind, Flags: pva.SearchMustReply | pva.SearchUnicast}
	cl.c.Send(pva.AppendSearch(nil, pva.FlagBigEndian, &ping))
	r = cl.next(t, 5*time.Second)
	if r.m.Seq != pva.SearchSeqFind || r.m.Found || len(r.m.CIDs) != 0 {
		t.Errorf("ping reply %+v", r.m)
	}
	// MustReply with a claim gets only the positive answer.
	cl.search(3, pva.SearchMustReply, "cap:a:mbox1", "nope")
	if r = cl.next(t, 5*time.Second); !r.m.Found || r.m.Seq != 3 {
		t.Errorf("reply %+v", r.m)
	}
	cl.none(t, 100*time.Millisecond)
	if w.srv.cnt.negative.Load() != 2 {
		t.Errorf("stats %+v", metrics.Sprint(&w.srv.cnt))
	}
}

// A registry endpoint with a zero address or port is never relayed: it
// would send the client back to pvans itself.
func TestZeroEndpointSkipped(t *testing.T) {
	w := newWorld(t, Options{})
	w.addServer(t, guidZ, netip.MustParseAddrPort("0.0.0.0:5075"), "zero:pv")
	w.addServer(t, pva.GUID{0xE}, netip.MustParseAddrPort("10.0.0.1:0"), "noport:pv")
	cl := dial(t, w.ep)
	cl.search(9, pva.SearchMustReply, "zero:pv", "noport:pv")
	if r := cl.next(t, 5*time.Second); r.m.Found {
		t.Errorf("zero endpoint relayed: %+v", r.m)
	}
	if w.srv.cnt.zeroEndpoint.Load() != 2 || w.srv.cnt.claims.Load() != 0 {
		t.Errorf("stats %+v", metrics.Sprint(&w.srv.cnt))
	}
}

// A name registered after the client searched is pushed on the same
// connection, without a new search.
func TestPushAfterRegistration(t *testing.T) {
	testutil.CheckGoroutines(t)
	w := newWorld(t, Options{})
	cl := dial(t, w.ep)
	cl.search(42, 0, "late:pv", "cap:a:mbox1")
	if r := cl.next(t, 5*time.Second); r.m.GUID != guidA {
		t.Fatalf("direct reply %+v", r.m)
	}
	testutil.WaitFor(t, 20*time.Second, "a waiter registered", func() bool { return w.res.Stats().Waiting == 1 })
	start := time.Now()
	w.addServer(t, guidB, epB, "cap:b:mbox3", "late:pv")
	r := cl.next(t, time.Second)
	t.Logf("pushed after %v", time.Since(start))
	if r.m.GUID != guidB || !r.m.Found || !equalCIDs(r.m.CIDs, 100) || r.m.Seq != 42 ||
		r.m.Addr.Addr() != epB.Addr() || r.m.Port != epB.Port() {
		t.Fatalf("pushed %+v", r.m)
	}
	if w.srv.cnt.pushed.Load() != 1 || w.srv.cnt.searches.Load() != 1 {
		t.Errorf("stats %+v", metrics.Sprint(&w.srv.cnt))
	}
}

// CREATE_CHANNEL is refused the way PVXS refuses an unknown channel unless
// the ChannelProvider takes it.
func TestCreateChannel(t *testing.T) {
	prov := &provider{}
	w := newWorld(t, Options{Channels: prov})
	nc := rawConn(t, w.ep)
	req := []byte{2, 0, 7, 0, 0, 0, 4, 'n', 'o', 'p', 'e', 8, 0, 0, 0, 6, 's', 'e', 'r', 'v', 'e', 'r'}
	nc.Write(pva.AppendMessage(nil, 0, pva.CmdCreateChannel, req))
	for _, cid := range []uint32{7, 8} {
		h, p := readMsg(t, nc)
		r := pva.NewReader(p, h.BigEndian(), "reply")
		gotCID, sid, st := r.U32("cid"), r.U32("sid"), r.Status("status")
		if h.Command != pva.CmdCreateChannel || h.Flags != pva.FlagServer || gotCID != cid || sid != 0xFFFFFFFF ||
			st.Type != pva.StatusFatal || st.Message != "Refused to create Channel" || r.Err() != nil || r.Remaining() != 0 {
			t.Fatalf("refusal %+v cid %d sid %#x %+v", h, gotCID, sid, st)
		}
	}
	prov.take.Store(true)
	nc.Write(pva.AppendMessage(nil, 0, pva.CmdCreateChannel, req))
	nc.Write(pva.AppendMessage(nil, 0, pva.CmdRPC, []byte{1}))
	testutil.WaitFor(t, 20*time.Second, "3 channel offers", func() bool { return prov.count() == 3 }) // the refused offer too
	if w.srv.cnt.refused.Load() != 2 {
		t.Errorf("stats %+v", metrics.Sprint(&w.srv.cnt))
	}
	nc.Close()
	testutil.WaitFor(t, 20*time.Second, "the channel closed", func() bool { return prov.closed.Load() == 1 })
}

// Unknown commands are drained and ignored; segmented searches are
// reassembled; both on a little-endian connection.
func TestUnknownAndSegmented(t *testing.T) {
	w := newWorld(t, Options{})
	nc := rawConn(t, w.ep)
	s := pva.Search{Seq: 5, Flags: pva.SearchUnicast, Protocols: [][]byte{[]byte("tcp")},
		Names: []pva.SearchName{{CID: 1, Name: []byte("cap:a:mbox2")}}}
	whole := pva.AppendSearch(nil, pva.FlagBigEndian, &s)
	p := whole[8:]
	var b []byte
	b = pva.AppendMessage(b, 0, pva.Command(0x55), []byte("whatever this is"))
	b = pva.AppendMessage(b, pva.FlagBigEndian|pva.FlagSegFirst, pva.CmdSearch, p[:10])
	b = pva.AppendMessage(b, pva.FlagBigEndian|pva.FlagSegMiddle, pva.CmdSearch, p[10:20])
	b = pva.AppendMessage(b, pva.FlagBigEndian|pva.FlagSegLast, pva.CmdSearch, p[20:])
	nc.Write(b)
	h, pl := readMsg(t, nc)
	var m pva.SearchResponse
	if err := m.Decode(pl, h.BigEndian()); err != nil || m.GUID != guidA || !equalCIDs(m.CIDs, 1) {
		t.Fatalf("reply %+v %v", m, err)
	}
	if w.srv.cnt.ignored.Load() != 1 {
		t.Errorf("stats %+v", metrics.Sprint(&w.srv.cnt))
	}
}

// A malformed search closes the connection, as PVXS does.
func TestMalformedSearchCloses(t *testing.T) {
	w := newWorld(t, Options{})
	nc := rawConn(t, w.ep)
	nc.Write(pva.AppendMessage(nil, pva.FlagBigEndian, pva.CmdSearch, []byte{1, 2, 3}))
	if !isClosed(nc, 5*time.Second) {
		t.Fatal("connection kept open")
	}
	if w.srv.cnt.decodeErrors.Load() != 1 {
		t.Errorf("stats %+v", metrics.Sprint(&w.srv.cnt))
	}
}

// Hostile peers are disconnected and counted while another client keeps
// getting answers, and every goroutine is gone afterwards.
func TestHostilePeers(t *testing.T) {
	raiseFDLimit(t, 4096)
	testutil.CheckGoroutines(t)
	w := newWorld(t, Options{Conn: pvaconn.Options{
		MaxMessage:     DefaultMaxMessageBytes, // the production bound
		SendQueueBytes: 64 << 10, MessageTimeout: time.Second,
		HandshakeTimeout: 10 * time.Second, IdleTimeout: 2 * time.Second,
	}})
	good := dial(t, w.ep)
	seq := uint32(0)
	stillAnswers := func() {
		t.Helper()
		seq++
		good.search(seq, 0, "cap:a:mbox1")
		if r := good.next(t, 60*time.Second); r.m.Seq != seq || r.m.GUID != guidA {
			t.Fatalf("good client got %+v", r.m)
		}
	}

	t.Run("garbage", func(t *testing.T) {
		nc, _ := net.Dial("tcp", w.ep.String())
		defer nc.Close()
		nc.Write([]byte("GET / HTTP/1.1\r\nHost: pvans\r\n\r\n"))
		if !isClosed(nc, 5*time.Second) {
			t.Fatal("garbage peer kept")
		}
		stillAnswers()
	})
	t.Run("2GiB header", func(t *testing.T) {
		nc := rawConn(t, w.ep)
		nc.Write([]byte{0xCA, 2, 0x80, byte(pva.CmdSearch), 0x80, 0, 0, 0})
		if !isClosed(nc, 5*time.Second) {
			t.Fatal("2 GiB peer kept")
		}
		if w.srv.conn.Oversize.Load() != 1 {
			t.Errorf("stats %+v", metrics.Sprint(&w.srv.cnt))
		}
		stillAnswers()
	})
	t.Run("closed mid-message", func(t *testing.T) {
		nc := rawConn(t, w.ep)
		s := pva.Search{Seq: 1, Names: []pva.SearchName{{CID: 1, Name: []byte("cap:a:mbox1")}}}
		msg := pva.AppendSearch(nil, pva.FlagBigEndian, &s)
		nc.Write(msg[:len(msg)-3])
		nc.Close()
		stillAnswers()
	})
	t.Run("slow loris", func(t *testing.T) {
		nc := rawConn(t, w.ep)
		nc.Write([]byte{0xCA, 2, 0x80, byte(pva.CmdSearch), 0, 0, 1, 0})
		for i := 0; i < 150; i++ {
			if _, err := nc.Write([]byte{0}); err != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !isClosed(nc, 5*time.Second) || w.srv.conn.MessageTimeouts.Load() != 1 {
			t.Fatalf("slow loris kept: %+v", metrics.Sprint(&w.srv.cnt))
		}
		stillAnswers()
	})
	t.Run("never reads", func(t *testing.T) {
		nc := rawConn(t, w.ep)
		// Discovery pings: every one is owed a reply, so the daemon writes
		// more than it reads.
		ping := pva.Search{Seq: 1, Flags: pva.SearchMustReply}
		msg := pva.AppendSearch(nil, pva.FlagBigEndian, &ping)
		batch := bytes.Repeat(msg, 1024)
		limits := func() uint64 {
			return w.srv.conn.SendQueueFull.Load() + w.srv.conn.WriteTimeouts.Load()
		}
		before := limits()
		nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
		var err error
		for err == nil {
			_, err = nc.Write(batch)
		}
		// The daemon stops reading at half the queue bound, so the peer
		// ends at the write deadline (or the queue bound); either way the
		// daemon closed it, not our deadline, and the queue never grew.
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("non-reading client not cut off: %+v", metrics.Sprint(&w.srv.cnt))
		}
		if limits() != before+1 {
			t.Fatalf("no limit counted: %+v", metrics.Sprint(&w.srv.cnt))
		}
		stillAnswers()
	})
}

// A thousand peers that connect and say nothing are all held at once
// (nothing but the daemon's own timers may cut them) while a client keeps
// getting answers, and every one is released when it closes. The timers
// are an hour here: with TestHostilePeers' 2 s idle timeout, dialling a
// thousand connections on a loaded machine (under -race) took longer than
// the first ones were allowed to live, and the count never reached 1000.
func TestThousandIdlePeers(t *testing.T) {
	raiseFDLimit(t, 4096)
	testutil.CheckGoroutines(t)
	w := newWorld(t, Options{Conn: pvaconn.Options{
		MaxMessage:       DefaultMaxMessageBytes,
		HandshakeTimeout: time.Hour, IdleTimeout: time.Hour,
	}})
	good := dial(t, w.ep)
	seq := uint32(0)
	stillAnswers := func() {
		t.Helper()
		seq++
		good.search(seq, 0, "cap:a:mbox1")
		if r := good.next(t, 60*time.Second); r.m.Seq != seq || r.m.GUID != guidA {
			t.Fatalf("good client got %+v", r.m)
		}
	}
	conns := func() int64 { return w.srv.cnt.active.Load() }
	testutil.WaitFor(t, 60*time.Second, "the good client's connection", func() bool { return conns() == 1 })
	idle := make([]net.Conn, 0, 1000)
	defer func() {
		for _, nc := range idle {
			nc.Close()
		}
	}()
	for i := 0; i < 1000; i++ {
		nc, err := net.Dial("tcp", w.ep.String())
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, nc)
	}
	testutil.WaitFor(t, 2*time.Minute, "1000 more connections", func() bool { return conns() == 1001 })
	stillAnswers()
	if w.srv.cnt.active.Load() != 1001 || w.srv.conn.IdleTimeouts.Load()+w.srv.conn.HandshakeTimeouts.Load() != 0 {
		t.Fatalf("stats %+v, want the thousand idle peers held", metrics.Sprint(&w.srv.cnt))
	}
	for _, nc := range idle {
		nc.Close()
	}
	idle = nil
	testutil.WaitFor(t, 2*time.Minute, "the idle connections gone", func() bool { return conns() == 1 })
	stillAnswers()
}

// Connections beyond MaxConns are closed at once and counted; capacity
// returns when one leaves.
func TestMaxConns(t *testing.T) {
	testutil.CheckGoroutines(t)
	w := newWorld(t, Options{MaxConns: 2})
	a := dial(t, w.ep)
	dial(t, w.ep)
	nc, err := net.Dial("tcp", w.ep.String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !isClosed(nc, 5*time.Second) {
		t.Fatal("third connection kept")
	}
	if w.srv.cnt.rejected.Load() != 1 || w.srv.cnt.active.Load() != 2 {
		t.Errorf("stats %+v", metrics.Sprint(&w.srv.cnt))
	}
	a.c.Close()
	<-a.c.Done()
	testutil.WaitFor(t, 20*time.Second, "one connection active", func() bool { return w.srv.cnt.active.Load() == 1 })
	c := dial(t, w.ep)
	c.search(1, 0, "cap:a:mbox1")
	c.next(t, 5*time.Second)
}

// The daemon's idle timeout drops a dead client; ECHO keeps one alive.
func TestIdleAndEcho(t *testing.T) {
	w := newWorld(t, Options{Conn: pvaconn.Options{IdleTimeout: 300 * time.Millisecond}})
	dead := rawConn(t, w.ep)
	alive := rawConn(t, w.ep)
	for i := 0; i < 8; i++ {
		alive.Write(pva.AppendEcho(nil, 0, []byte{byte(i)}))
		h, p := readMsg(t, alive)
		if h.Command != pva.CmdEcho || h.Flags != pva.FlagServer || !bytes.Equal(p, []byte{byte(i)}) {
			t.Fatalf("echo reply %+v %x", h, p)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !isClosed(dead, 5*time.Second) {
		t.Fatal("dead client kept")
	}
	alive.Write(pva.AppendEcho(nil, 0, nil))
	if h, _ := readMsg(t, alive); h.Command != pva.CmdEcho {
		t.Fatal("live client dropped")
	}
	if w.srv.conn.IdleTimeouts.Load() < 1 {
		t.Errorf("stats %+v", metrics.Sprint(&w.srv.cnt))
	}
}

func TestStartErrors(t *testing.T) {
	if err := New(Options{}, nil).Start(); err == nil {
		t.Fatal("no addresses accepted")
	}
	w := newWorld(t, Options{})
	s := New(Options{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0"), w.ep}}, nil)
	if err := s.Start(); err == nil {
		s.Close()
		t.Fatal("busy port accepted")
	}
	s.Close()
}

type provider struct {
	mu     sync.Mutex
	n      int
	take   atomic.Bool
	closed atomic.Int32
}

func (p *provider) Message(c *pvaconn.Conn, h pva.Header, payload []byte) bool {
	p.mu.Lock()
	p.n++
	p.mu.Unlock()
	return p.take.Load()
}

func (p *provider) Closed(c *pvaconn.Conn) { p.closed.Add(1) }

func (p *provider) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func raiseFDLimit(t *testing.T, want uint64) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skip(err)
	}
	if rl.Cur >= want {
		return
	}
	if rl.Max < want {
		t.Skipf("hard fd limit %d < %d", rl.Max, want)
	}
	old := rl
	rl.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}
