package tcpsearch

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
)

// TestConnectionsPerSource is the issue-14 row "10,000 TCP connections from
// one address, kept alive with ECHO": one address fills its own share, never
// tcp.max_connections, and a client elsewhere is still served and answered.
func TestConnectionsPerSource(t *testing.T) {
	const total, perSource, attack = 60, 10, 50
	w := newWorld(t, Options{MaxConns: total, MaxConnsPerSource: perSource})
	attacker := netip.MustParseAddr("127.0.0.1")
	var kept []net.Conn
	for i := 0; i < attack; i++ {
		d := &net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(attacker, 0)), Timeout: 5 * time.Second}
		nc, err := d.Dial("tcp", w.ep.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		kept = append(kept, nc)
	}
	open := 0
	for _, nc := range kept {
		// A served connection gets the 36-byte greeting and stays open.
		nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 36)
		if n, err := readFull(nc, buf); err == nil && n == 36 && !isClosed(nc, 50*time.Millisecond) {
			open++
		}
	}
	if open != perSource {
		t.Fatalf("%d of %d connections from one address stayed open; want %d", open, attack, perSource)
	}
	if w.srv.cnt.perSource.Load() != attack-perSource {
		t.Fatalf("per-source rejections %d, want %d (%+v)", w.srv.cnt.perSource.Load(), attack-perSource, metrics.Sprint(&w.srv.cnt))
	}
	// Another address is served and answered while the attacker holds its
	// share.
	good := netip.MustParseAddr("127.0.0.2")
	nc := rawConnFrom(t, w.ep, good)
	s := pva.Search{Seq: 1, Flags: pva.SearchUnicast, Protocols: [][]byte{[]byte("tcp")},
		Names: []pva.SearchName{{CID: 7, Name: []byte("cap:a:mbox1")}}}
	nc.Write(pva.AppendSearch(nil, 0, &s))
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	h, p := readMsg(t, nc)
	var m pva.SearchResponse
	if h.Command != pva.CmdSearchResponse || m.Decode(p, h.BigEndian()) != nil || len(m.CIDs) != 1 || m.CIDs[0] != 7 {
		t.Fatalf("well-behaved client got %+v %+v", h, m)
	}
}

func readFull(nc net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := nc.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// failingListener fails every Accept the way a process out of file
// descriptors does.
type failingListener struct {
	calls atomic.Int64
	done  chan struct{}
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.calls.Add(1)
	select {
	case <-l.done:
		return nil, net.ErrClosed
	default:
	}
	return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
}

// TestAcceptBacksOff: out of file descriptors, the accept loop once spun at
// 88 % CPU writing 1.8M "accept failed" lines in 35 s. It backs
// off (5 ms doubling to 1 s) and logs once per interval.
func TestAcceptBacksOff(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	s := New(Options{Logger: zap.New(core)}, nil)
	l := &failingListener{done: make(chan struct{})}
	s.wg.Add(1)
	go s.acceptLoop(l, nil)
	time.Sleep(500 * time.Millisecond)
	close(l.done)
	s.Close()
	s.wg.Wait()
	if n := l.calls.Load(); n > 10 {
		t.Fatalf("%d accept calls in 500 ms while failing; want a back-off (≤ 10)", n)
	}
	if n := logs.Len(); n != 1 {
		t.Fatalf("%d log lines, want 1 per interval", n)
	}
	if s.cnt.acceptErrors.Load() == 0 {
		t.Fatal("accept errors not counted")
	}
}

// blockedTeardown is a ChannelProvider whose Closed waits for release:
// a connection's teardown held up (in pvans, by the resolver's lock).
type blockedTeardown struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockedTeardown) Message(*pvaconn.Conn, pva.Header, []byte) bool { return false }
func (b *blockedTeardown) Closed(*pvaconn.Conn) {
	b.entered <- struct{}{}
	<-b.release
}

// teardownWaiting starts a server with o whose connections' teardowns
// wait (blockedTeardown), serves one connection, closes it and returns
// once its teardown has started and waits: the world, a dialer, whether
// a connection was served (the 36-byte greeting), and unblock, which
// lets the teardowns finish (also at cleanup).
func teardownWaiting(t *testing.T, o Options) (w *world, dial func() net.Conn, greeted func(net.Conn) bool, unblock func()) {
	t.Helper()
	b := &blockedTeardown{entered: make(chan struct{}, 1), release: make(chan struct{})}
	o.Channels = b
	w = newWorld(t, o)
	var once sync.Once
	unblock = func() { once.Do(func() { close(b.release) }) }
	t.Cleanup(unblock)
	dial = func() net.Conn {
		nc, err := net.DialTimeout("tcp", w.ep.String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return nc
	}
	greeted = func(nc net.Conn) bool {
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := readFull(nc, make([]byte, 36))
		return err == nil && n == 36
	}
	first := dial()
	if !greeted(first) {
		t.Fatal("first connection not served")
	}
	first.Close()
	<-b.entered // its teardown has started, and waits
	return w, dial, greeted, unblock
}

// TestClosedConnectionFreesItsShareAtOnce: a client that closes its
// connection and reconnects is served while the old connection's
// teardown is still held up; its source's share counts open sockets.
// (TestSoak's 100 clients of 127.0.0.1 were refused at
// DefaultMaxConnsPerSource on a loaded host: closed connections kept
// their places while waiting for the resolver's lock.)
func TestClosedConnectionFreesItsShareAtOnce(t *testing.T) {
	w, dial, greeted, unblock := teardownWaiting(t, Options{MaxConnsPerSource: 1})
	second := dial()
	if !greeted(second) || isClosed(second, 200*time.Millisecond) {
		t.Fatalf("reconnection refused while the closed one's teardown waited (refused at the per-source bound: %d)", w.srv.cnt.perSource.Load())
	}
	if n := w.srv.cnt.perSource.Load(); n != 0 {
		t.Fatalf("%d connections refused at the per-source bound, want 0", n)
	}
	unblock()
	second.Close()
}

// TestTeardownsCountAgainstMaxConns: a connection whose teardown waits
// keeps its place under MaxConns (only its source's share is given back
// at once), so a source that connects and closes in a loop while
// teardowns wait cannot pile up more than MaxConns of them.
func TestTeardownsCountAgainstMaxConns(t *testing.T) {
	w, dial, greeted, unblock := teardownWaiting(t, Options{MaxConns: 1})
	second := dial()
	if greeted(second) {
		t.Fatalf("a connection was served while MaxConns=1 was held by a waiting teardown (rejected %d)", w.srv.cnt.rejected.Load())
	}
	if n := w.srv.cnt.rejected.Load(); n != 1 {
		t.Fatalf("rejected at MaxConns: %d, want 1", n)
	}
	unblock()
	// Once the teardown is done, its place is free again.
	deadline := time.Now().Add(30 * time.Second)
	for w.srv.cnt.active.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("teardown done but %d places still held", w.srv.cnt.active.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if third := dial(); !greeted(third) {
		t.Fatal("connection refused after the teardown gave its place back")
	}
}
