package pvaconn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/testutil"
)

// loopPair returns both ends of a loopback TCP connection.
func loopPair(t testing.TB) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-ch
	t.Cleanup(func() { client.Close() })
	return server, client
}

// listen is a loopback listener closed when the test ends.
func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

type recorder struct {
	mu   sync.Mutex
	msgs []msg
	got  chan struct{}
}

type msg struct {
	h       pva.Header
	payload []byte
}

func newRecorder() *recorder { return &recorder{got: make(chan struct{}, 1000)} }

func (r *recorder) Message(c *Conn, h pva.Header, p []byte) {
	r.mu.Lock()
	r.msgs = append(r.msgs, msg{h, bytes.Clone(p)})
	r.mu.Unlock()
	r.got <- struct{}{}
}

func (r *recorder) wait(t *testing.T, n int) []msg {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-r.got:
		case <-time.After(5 * time.Second):
			t.Fatalf("timed out waiting for message %d", i+1)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]msg(nil), r.msgs...)
}

func waitDone(t *testing.T, c *Conn) error {
	t.Helper()
	select {
	case <-c.Done():
		return c.Err()
	case <-time.After(5 * time.Second):
		t.Fatal("connection not closed")
		return nil
	}
}

// The server role greets and validates byte for byte as PVXS does
// (capture blocks #27-#29).
func TestServerHandshakeMatchesCapture(t *testing.T) {
	testutil.CheckGoroutines(t)
	cap := testutil.CaptureBlocks(t)
	sc, cc := loopPair(t)
	c := Serve(sc, Options{}, newRecorder())
	defer func() { c.Close(); waitDone(t, c) }()
	if got := testutil.ReadN(t, cc, len(cap[27])); !bytes.Equal(got, cap[27]) {
		t.Fatalf("greeting\n got %x\nwant %x", got, cap[27])
	}
	cc.Write(cap[28])
	if got := testutil.ReadN(t, cc, len(cap[29])); !bytes.Equal(got, cap[29]) {
		t.Fatalf("validated\n got %x\nwant %x", got, cap[29])
	}
	select {
	case <-c.Validated():
	case <-time.After(5 * time.Second):
		t.Fatal("not validated")
	}
}

func TestServerBigEndianGreeting(t *testing.T) {
	sc, cc := loopPair(t)
	c := Serve(sc, Options{BigEndian: true}, newRecorder())
	defer c.Close()
	got := testutil.ReadN(t, cc, 8+8)
	if !bytes.Equal(got[:8], []byte{0xCA, 2, 0xC1, 2, 0, 0, 0, 0}) || got[10] != 0xC0 || got[15] != 0x14 {
		t.Fatalf("big-endian greeting: %x", got)
	}
}

// A PVA client built on Dial talks to Serve: handshake, application
// messages both ways, byte order latched from the server.
func TestDialServeRoundTrip(t *testing.T) {
	testutil.CheckGoroutines(t)
	for _, be := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srvRec := newRecorder()
		srvCh := make(chan *Conn, 1)
		go func() {
			nc, err := ln.Accept()
			if err == nil {
				srvCh <- Serve(nc, Options{BigEndian: be}, srvRec)
			}
		}()
		cliRec := newRecorder()
		addr := ln.Addr().(*net.TCPAddr).AddrPort()
		cli, err := Dial(context.Background(), addr, Options{BigEndian: !be}, cliRec)
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		srv := <-srvCh
		if got, want := cli.Flags(), map[bool]uint8{false: 0, true: pva.FlagBigEndian}[be]; got != want {
			t.Errorf("be=%v: client flags %#x, want %#x (latched from SET_BYTE_ORDER)", be, got, want)
		}
		if srv.Flags()&pva.FlagServer == 0 {
			t.Errorf("server flags %#x lack the direction bit", srv.Flags())
		}
		cli.Send(pva.AppendMessage(nil, cli.Flags(), pva.CmdGet, []byte{1, 2, 3}))
		m := srvRec.wait(t, 1)[0]
		if m.h.Command != pva.CmdGet || !bytes.Equal(m.payload, []byte{1, 2, 3}) || m.h.BigEndian() != be {
			t.Errorf("server got %+v %x", m.h, m.payload)
		}
		srv.Send(pva.AppendMessage(nil, srv.Flags(), pva.CmdMessage, []byte{9}))
		m = cliRec.wait(t, 1)[0]
		if m.h.Command != pva.CmdMessage || !m.h.FromServer() || !bytes.Equal(m.payload, []byte{9}) {
			t.Errorf("client got %+v %x", m.h, m.payload)
		}
		if cli.Remote() != addr || srv.Remote() != cli.Local() {
			t.Errorf("endpoints: %v %v %v", cli.Remote(), srv.Remote(), cli.Local())
		}
		cli.Close()
		if err := waitDone(t, srv); err != io.EOF {
			t.Errorf("server saw %v, want EOF", err)
		}
		if err := waitDone(t, cli); err != ErrClosed {
			t.Errorf("client err %v", err)
		}
	}
}

// The client role answers a pvAccessCPP-style server: byte order latched
// (BE here), "ca" chosen, ECHO sent on the fake clock's schedule.
func TestClientHandshakeAndEcho(t *testing.T) {
	testutil.CheckGoroutines(t)
	ln := listen(t)
	fc := clock.NewFake(time.Time{})
	type res struct {
		c   *Conn
		err error
	}
	rc := make(chan res, 1)
	go func() {
		c, err := Dial(context.Background(), ln.Addr().(*net.TCPAddr).AddrPort(),
			Options{Clock: fc, AuthUser: "u", AuthHost: "h"}, newRecorder())
		rc <- res{c, err}
	}()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	sv := pva.AppendSetByteOrder(nil, pva.FlagServer|pva.FlagBigEndian)
	sv = pva.AppendServerValidation(sv, pva.FlagServer|pva.FlagBigEndian,
		&pva.ServerValidation{BufferSize: 1, RegistrySize: 2, AuthMethods: []string{"anonymous", "ca", "x509"}})
	sc.Write(sv)
	hdr := testutil.ReadN(t, sc, 8)
	h, err := pva.DecodeHeader(hdr)
	if err != nil || h.Command != pva.CmdConnectionValidation || h.Flags != pva.FlagBigEndian {
		t.Fatalf("client validation header %x (%v)", hdr, err)
	}
	var cv pva.ClientValidation
	if err := cv.Decode(testutil.ReadN(t, sc, int(h.Size)), true); err != nil || cv.AuthMethod != "ca" {
		t.Fatalf("client validation %+v %v", cv, err)
	}
	if !bytes.Equal(cv.AuthPayload, pva.CAAuthPayload(true, "u", "h")) {
		t.Errorf("auth payload %x", cv.AuthPayload)
	}
	sc.Write(pva.AppendConnectionValidated(nil, pva.FlagServer|pva.FlagBigEndian, pva.Status{}))
	r := <-rc
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer func() { r.c.Close(); waitDone(t, r.c) }()
	fc.Advance(DefaultEchoInterval - time.Millisecond)
	fc.Advance(time.Millisecond)
	if got := testutil.ReadN(t, sc, 8); !bytes.Equal(got, []byte{0xCA, 2, 0x80, 2, 0, 0, 0, 0}) {
		t.Fatalf("echo %x", got)
	}
	fc.Advance(DefaultEchoInterval)
	if got := testutil.ReadN(t, sc, 8); got[3] != byte(pva.CmdEcho) {
		t.Fatalf("second echo %x", got)
	}
	// Nothing else was sent between the ticks.
	sc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, _ := sc.Read(make([]byte, 1)); n != 0 {
		t.Fatal("unexpected extra bytes")
	}
}

func TestDialFailsWhenServerCloses(t *testing.T) {
	ln := listen(t)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
	}()
	if _, err := Dial(context.Background(), ln.Addr().(*net.TCPAddr).AddrPort(), Options{}, newRecorder()); err == nil {
		t.Fatal("Dial succeeded against a server that hung up")
	}
}

func TestServerAnswersEchoWithSamePayload(t *testing.T) {
	sc, cc := loopPair(t)
	c := Serve(sc, Options{}, newRecorder())
	defer c.Close()
	testutil.ReadN(t, cc, 36)
	cc.Write(pva.AppendEcho(nil, pva.FlagBigEndian, []byte("ping!")))
	got := testutil.ReadN(t, cc, 8+5)
	want := pva.AppendEcho(nil, pva.FlagServer, []byte("ping!"))
	if !bytes.Equal(got, want) {
		t.Fatalf("echo reply %x, want %x", got, want)
	}
}

// Protocol faults close the connection and are counted.
func TestProtocolFaults(t *testing.T) {
	testutil.CheckGoroutines(t)
	val := pva.AppendClientValidation(nil, 0, &pva.ClientValidation{AuthMethod: "anonymous"})
	cases := []struct {
		name  string
		bytes []byte
		want  error
		count func(*Counters) uint64
	}{
		{"garbage", []byte("GET / HTTP/1.0\r\n\r\n"), nil, func(c *Counters) uint64 { return c.ProtocolErrors.Load() }},
		{"version0", []byte{0xCA, 0, 0, 2, 0, 0, 0, 0}, nil, func(c *Counters) uint64 { return c.ProtocolErrors.Load() }},
		{"direction", []byte{0xCA, 2, 0x40, 2, 0, 0, 0, 0}, ErrDirection, func(c *Counters) uint64 { return c.ProtocolErrors.Load() }},
		{"direction control", []byte{0xCA, 2, 0x41, 2, 0, 0, 0, 0}, ErrDirection, func(c *Counters) uint64 { return c.ProtocolErrors.Load() }},
		{"2 GiB", []byte{0xCA, 2, 0x80, 3, 0x80, 0, 0, 0}, ErrMessageTooLarge, func(c *Counters) uint64 { return c.Oversize.Load() }},
		{"last without first", pva.AppendMessage(nil, pva.FlagSegLast, pva.CmdRPC, []byte{1}), ErrSegmentation, func(c *Counters) uint64 { return c.ProtocolErrors.Load() }},
		{"middle without first", pva.AppendMessage(nil, pva.FlagSegMiddle, pva.CmdRPC, []byte{1}), ErrSegmentation, func(c *Counters) uint64 { return c.ProtocolErrors.Load() }},
		{"first twice", append(pva.AppendMessage(nil, pva.FlagSegFirst, pva.CmdRPC, []byte{1}),
			pva.AppendMessage(nil, pva.FlagSegFirst, pva.CmdRPC, []byte{1})...), ErrSegmentation, func(c *Counters) uint64 { return c.ProtocolErrors.Load() }},
		{"unsegmented inside", append(pva.AppendMessage(nil, pva.FlagSegFirst, pva.CmdRPC, []byte{1}),
			pva.AppendMessage(nil, 0, pva.CmdRPC, []byte{1})...), ErrSegmentation, func(c *Counters) uint64 { return c.ProtocolErrors.Load() }},
		{"command change", append(pva.AppendMessage(nil, pva.FlagSegFirst, pva.CmdRPC, []byte{1}),
			pva.AppendMessage(nil, pva.FlagSegLast, pva.CmdGet, []byte{1})...), ErrSegmentation, func(c *Counters) uint64 { return c.ProtocolErrors.Load() }},
		{"segments too large", append(pva.AppendMessage(nil, pva.FlagSegFirst, pva.CmdRPC, make([]byte, 600)),
			pva.AppendMessage(nil, pva.FlagSegLast, pva.CmdRPC, make([]byte, 600))...), ErrMessageTooLarge, func(c *Counters) uint64 { return c.Oversize.Load() }},
		{"bad validation", pva.AppendMessage(nil, 0, pva.CmdConnectionValidation, []byte{1, 2}), nil, func(c *Counters) uint64 { return c.ProtocolErrors.Load() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc, cc := loopPair(t)
			cnt := new(Counters)
			c := Serve(sc, Options{Counters: cnt, MaxMessage: 1000}, newRecorder())
			if !strings.HasPrefix(tc.name, "bad") {
				cc.Write(val)
			}
			cc.Write(tc.bytes)
			err := waitDone(t, c)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("closed with %v, want %v", err, tc.want)
			}
			if tc.count(cnt) != 1 {
				t.Errorf("counters %+v", metrics.Sprint(cnt))
			}
		})
	}
}

// Segments are reassembled into one message, with control messages
// allowed in between; the payload is decoded in the first segment's order.
func TestSegmentReassembly(t *testing.T) {
	sc, cc := loopPair(t)
	rec := newRecorder()
	c := Serve(sc, Options{}, rec)
	defer c.Close()
	var b []byte
	b = pva.AppendMessage(b, pva.FlagBigEndian|pva.FlagSegFirst, pva.CmdRPC, []byte("hello, "))
	b = pva.AppendSetByteOrder(b, 0) // control between segments
	b = pva.AppendMessage(b, pva.FlagBigEndian|pva.FlagSegMiddle, pva.CmdRPC, []byte("segmented "))
	b = pva.AppendMessage(b, pva.FlagBigEndian|pva.FlagSegLast, pva.CmdRPC, []byte("world"))
	b = pva.AppendMessage(b, 0, pva.CmdGet, []byte("next"))
	// Byte by byte: reassembly must not depend on read boundaries.
	for i := range b {
		cc.Write(b[i : i+1])
	}
	ms := rec.wait(t, 2)
	if ms[0].h.Command != pva.CmdRPC || string(ms[0].payload) != "hello, segmented world" ||
		ms[0].h.Segment() != 0 || !ms[0].h.BigEndian() || ms[0].h.Size != 22 {
		t.Errorf("reassembled %+v %q", ms[0].h, ms[0].payload)
	}
	if ms[1].h.Command != pva.CmdGet || string(ms[1].payload) != "next" {
		t.Errorf("after segments %+v %q", ms[1].h, ms[1].payload)
	}
}

// A message larger than the read buffer grows it for that message.
func TestLargeMessage(t *testing.T) {
	sc, cc := loopPair(t)
	rec := newRecorder()
	c := Serve(sc, Options{}, rec)
	defer c.Close()
	big := bytes.Repeat([]byte("0123456789"), 20000)
	// Validated first: before the handshake nothing above MaxPreHandshake
	// is accepted.
	val := pva.AppendClientValidation(nil, 0, &pva.ClientValidation{AuthMethod: "anonymous"})
	go cc.Write(append(append(val, pva.AppendMessage(nil, 0, pva.CmdRPC, big)...), pva.AppendMessage(nil, 0, pva.CmdGet, []byte("x"))...))
	ms := rec.wait(t, 2)
	if !bytes.Equal(ms[0].payload, big) || string(ms[1].payload) != "x" {
		t.Fatalf("large message mangled: %d bytes, then %q", len(ms[0].payload), ms[1].payload)
	}
}

// every writes b to c each d until the test ends, a peer that is never
// silent.
func every(t *testing.T, c net.Conn, d time.Duration, b []byte) {
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(d):
				c.Write(b)
			}
		}
	}()
	t.Cleanup(func() { close(stop) })
}

func TestTimeouts(t *testing.T) {
	testutil.CheckGoroutines(t)
	val := pva.AppendClientValidation(nil, 0, &pva.ClientValidation{AuthMethod: "anonymous"})
	cases := []struct {
		name  string
		opt   Options
		feed  func(t *testing.T, cc net.Conn)
		want  error
		count func(*Counters) uint64
	}{
		{"idle", Options{IdleTimeout: 200 * time.Millisecond},
			func(t *testing.T, cc net.Conn) { cc.Write(val) },
			ErrIdleTimeout, func(c *Counters) uint64 { return c.IdleTimeouts.Load() }},
		{"handshake", Options{HandshakeTimeout: 200 * time.Millisecond},
			// Echoes keep the idle timer happy but do not validate.
			func(t *testing.T, cc net.Conn) { every(t, cc, 50*time.Millisecond, pva.AppendEcho(nil, 0, nil)) },
			ErrHandshakeTimeout, func(c *Counters) uint64 { return c.HandshakeTimeouts.Load() }},
		{"slow loris", Options{MessageTimeout: 300 * time.Millisecond},
			func(t *testing.T, cc net.Conn) {
				cc.Write(val)
				cc.Write([]byte{0xCA, 2, 0, 0x14, 100, 0, 0, 0})
				every(t, cc, 30*time.Millisecond, []byte{0})
			},
			ErrMessageTimeout, func(c *Counters) uint64 { return c.MessageTimeouts.Load() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc, cc := loopPair(t)
			cnt := new(Counters)
			o := tc.opt
			o.Counters = cnt
			c := Serve(sc, o, newRecorder())
			tc.feed(t, cc)
			if err := waitDone(t, c); err != tc.want || tc.count(cnt) != 1 {
				t.Fatalf("%v %+v", err, metrics.Sprint(cnt))
			}
		})
	}
}

// A peer that never reads: the queue limit closes the connection instead
// of letting memory grow.
func TestSendQueueBound(t *testing.T) {
	testutil.CheckGoroutines(t)
	sc, cc := loopPair(t)
	_ = cc
	cnt := new(Counters)
	c := Serve(sc, Options{Counters: cnt, SendQueueBytes: 256 << 10}, newRecorder())
	chunk := pva.AppendMessage(nil, c.Flags(), pva.CmdMessage, make([]byte, 32<<10))
	var err error
	for i := 0; i < 100000 && err == nil; i++ {
		err = c.Send(chunk)
		if c.Backlog() > 256<<10 {
			t.Fatalf("backlog %d above the bound", c.Backlog())
		}
	}
	if err != ErrSendQueueFull {
		t.Fatalf("Send: %v", err)
	}
	if waitDone(t, c) != ErrSendQueueFull || cnt.SendQueueFull.Load() != 1 {
		t.Fatalf("%v %+v", c.Err(), metrics.Sprint(cnt))
	}
	if c.Send(chunk) == nil {
		t.Fatal("Send after close succeeded")
	}
}

// Offer to a peer that never reads fills half the queue, then refuses,
// and the connection stays open for the peer's own replies (Send).
func TestOfferRefusesWithoutClosing(t *testing.T) {
	testutil.CheckGoroutines(t)
	sc, cc := loopPair(t)
	_ = cc
	cnt := new(Counters)
	c := Serve(sc, Options{Counters: cnt, SendQueueBytes: 256 << 10}, newRecorder())
	chunk := pva.AppendMessage(nil, c.Flags(), pva.CmdMessage, make([]byte, 32<<10))
	refused := false
	for range 1000 {
		if !c.Offer(chunk) {
			refused = true
			break
		}
		if c.Backlog() > 128<<10 {
			t.Fatalf("backlog %d above half the bound", c.Backlog())
		}
	}
	if !refused {
		t.Fatal("Offer never refused a peer that does not read")
	}
	if c.Err() != nil || cnt.SendQueueFull.Load() != 0 {
		t.Fatalf("Offer closed the connection: %v %+v", c.Err(), metrics.Sprint(cnt))
	}
	if err := c.Send(chunk); err != nil {
		t.Fatalf("Send after a refused Offer: %v", err)
	}
	c.Close()
	waitDone(t, c)
	if c.Offer(chunk) {
		t.Fatal("Offer after close succeeded")
	}
}

// Data arriving together with the peer's close is still delivered.
func TestClosedMidMessage(t *testing.T) {
	sc, cc := loopPair(t)
	rec := newRecorder()
	c := Serve(sc, Options{}, rec)
	b := pva.AppendMessage(nil, 0, pva.CmdGet, []byte("whole"))
	b = append(b, pva.AppendMessage(nil, 0, pva.CmdGet, []byte("partial"))[:10]...)
	testutil.ReadN(t, cc, 36) // unread data would make the close a reset
	cc.Write(b)
	cc.Close()
	if err := waitDone(t, c); err != io.EOF {
		t.Fatalf("err %v", err)
	}
	ms := rec.wait(t, 1)
	if len(ms) != 1 || string(ms[0].payload) != "whole" {
		t.Fatalf("got %d messages", len(ms))
	}
}

type closeRecorder struct {
	*recorder
	closed chan error
}

func (r closeRecorder) Closed(c *Conn, err error) { r.closed <- err }

func TestCloserCalledOnce(t *testing.T) {
	sc, _ := loopPair(t)
	h := closeRecorder{newRecorder(), make(chan error, 2)}
	c := Serve(sc, Options{}, h)
	c.Close()
	c.Close()
	<-c.Done()
	if err := <-h.closed; err != ErrClosed || len(h.closed) != 0 {
		t.Fatalf("Closed(%v), %d more", err, len(h.closed))
	}
}

func TestDialContextCancel(t *testing.T) {
	testutil.CheckGoroutines(t)
	ln := listen(t)
	acc := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); acc <- c }()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := Dial(ctx, netip.MustParseAddrPort(ln.Addr().String()), Options{}, newRecorder())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial: %v", err)
	}
	if c := <-acc; c != nil {
		c.Close()
	}
}

type replier struct{ size int }

func (r replier) Message(c *Conn, h pva.Header, p []byte) {
	c.Send(pva.AppendMessage(nil, c.Flags(), pva.CmdMessage, make([]byte, r.size)))
}

// A client that pipelines faster than it reads is slowed (the read loop
// pauses), not disconnected, and gets every reply.
func TestBackpressureNotDisconnect(t *testing.T) {
	testutil.CheckGoroutines(t)
	sc, cc := loopPair(t)
	cnt := new(Counters)
	c := Serve(sc, Options{Counters: cnt, SendQueueBytes: 16 << 10}, replier{1000})
	defer func() { c.Close(); waitDone(t, c) }()
	testutil.ReadN(t, cc, 36)
	const n = 3000
	go func() {
		cc.Write(pva.AppendClientValidation(nil, 0, &pva.ClientValidation{AuthMethod: "anonymous"}))
		cc.Write(bytes.Repeat(pva.AppendMessage(nil, 0, pva.CmdGet, []byte{1}), n))
	}()
	time.Sleep(200 * time.Millisecond) // let the queue fill while we do not read
	testutil.ReadN(t, cc, 9)
	testutil.ReadN(t, cc, n*(8+1000))
	if cnt.ReadPauses.Load() == 0 || cnt.SendQueueFull.Load() != 0 {
		t.Fatalf("%+v", metrics.Sprint(cnt))
	}
}

// A client's handler sees the server's ECHO replies, payload and all: the
// probe orders its CREATE_CHANNEL against the echo sent after it.
func TestClientHandlerGetsEchoReplies(t *testing.T) {
	ln := listen(t)
	srvCh := make(chan *Conn, 1)
	go func() {
		if nc, err := ln.Accept(); err == nil {
			srvCh <- Serve(nc, Options{}, newRecorder())
		}
	}()
	cliRec := newRecorder()
	cli, err := Dial(context.Background(), ln.Addr().(*net.TCPAddr).AddrPort(), Options{}, cliRec)
	if err != nil {
		t.Fatal(err)
	}
	srv := <-srvCh
	defer srv.Close()
	defer cli.Close()
	cli.Send(pva.AppendEcho(nil, cli.Flags(), []byte("mark")))
	if m := cliRec.wait(t, 1)[0]; m.h.Command != pva.CmdEcho || string(m.payload) != "mark" {
		t.Fatalf("client handler got %+v %q, want the echo reply", m.h, m.payload)
	}
}

// A server with KeepAlive sends an empty ECHO that often (a Phoebus client
// would otherwise close its idle name-server connection after 15 s).
func TestServerKeepAlive(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	ln := listen(t)
	srvCh := make(chan *Conn, 1)
	go func() {
		if nc, err := ln.Accept(); err == nil {
			srvCh <- Serve(nc, Options{KeepAlive: 10 * time.Second, Clock: clk}, newRecorder())
		}
	}()
	cliRec := newRecorder()
	cli, err := Dial(context.Background(), ln.Addr().(*net.TCPAddr).AddrPort(), Options{EchoInterval: time.Hour}, cliRec)
	if err != nil {
		t.Fatal(err)
	}
	srv := <-srvCh
	defer srv.Close()
	defer cli.Close()
	for i := 1; i <= 2; i++ {
		// The timer is armed again after the send: wait for it.
		for deadline := time.Now().Add(10 * time.Second); clk.Pending() == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		clk.Advance(10 * time.Second)
		if m := cliRec.wait(t, 1)[i-1]; m.h.Command != pva.CmdEcho || len(m.payload) != 0 || !m.h.FromServer() {
			t.Fatalf("keep-alive %d: %+v %q, want an empty ECHO from the server", i, m.h, m.payload)
		}
	}
}
