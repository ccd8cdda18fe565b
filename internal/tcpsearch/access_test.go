package tcpsearch

import (
	"bytes"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/testutil"
)

var (
	lo1 = netip.MustParseAddr("127.0.0.1")
	lo2 = netip.MustParseAddr("127.0.0.2")
)

func searchMsg(seq uint32, names ...string) []byte {
	s := pva.Search{Seq: seq, Flags: pva.SearchUnicast, Protocols: [][]byte{[]byte("tcp")}}
	for i, n := range names {
		s.Names = append(s.Names, pva.SearchName{CID: uint32(100 + i), Name: []byte(n)})
	}
	return pva.AppendSearch(nil, pva.FlagBigEndian, &s)
}

// readResponses reads search responses from nc until it has been quiet
// for quiet, returning them.
func readResponses(t testing.TB, nc net.Conn, quiet time.Duration) []pva.SearchResponse {
	t.Helper()
	var out []pva.SearchResponse
	for {
		nc.SetReadDeadline(time.Now().Add(quiet))
		var hb [pva.HeaderSize]byte
		if _, err := io.ReadFull(nc, hb[:]); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return out
			}
			t.Fatalf("read: %v", err)
		}
		h, err := pva.DecodeHeader(hb[:])
		if err != nil {
			t.Fatal(err)
		}
		p := testutil.ReadN(t, nc, int(h.PayloadLen()))
		if h.Command != pva.CmdSearchResponse {
			continue
		}
		var m pva.SearchResponse
		if err := m.Decode(p, h.BigEndian()); err != nil {
			t.Fatal(err)
		}
		m.CIDs = append([]uint32(nil), m.CIDs...)
		out = append(out, m)
	}
}

// A client outside the access list is closed at accept, before the
// greeting; an allowed one is served.
func TestDeniedClientRefusedAtAccept(t *testing.T) {
	testutil.CheckGoroutines(t)
	w := newWorld(t, Options{ClientAllowed: func(a netip.Addr) bool { return a != lo2 }})
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(lo2, 0))}
	nc, err := d.Dial("tcp", w.ep.String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := nc.Read(make([]byte, 64)); err == nil || n > 0 {
		t.Fatalf("denied client read %d bytes (err %v): want the connection closed", n, err)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("denied client left open")
	}
	allowed := rawConnFrom(t, w.ep, lo1) // handshake completes
	allowed.Write(searchMsg(1, "cap:a:mbox1"))
	if rs := readResponses(t, allowed, 300*time.Millisecond); len(rs) != 1 || rs[0].GUID != guidA {
		t.Fatalf("allowed client got %+v", rs)
	}
	if w.srv.cnt.denied.Load() != 1 || w.srv.cnt.accepted.Load() != 1 {
		t.Errorf("stats: denied %d accepted %d", w.srv.cnt.denied.Load(), w.srv.cnt.accepted.Load())
	}
}

// Messages beyond the per-source rate are dropped, counted across all
// the source's connections, never disconnecting; another source keeps its
// own budget; the budget refills with the (fake) clock.
func TestMessageRatePerSource(t *testing.T) {
	testutil.CheckGoroutines(t)
	clk := clock.NewFake(time.Time{})
	w := newWorld(t, Options{MessageRate: 1, MessageBurst: 3, Clock: clk})
	a1, a2 := rawConnFrom(t, w.ep, lo1), rawConnFrom(t, w.ep, lo1)
	b := rawConnFrom(t, w.ep, lo2)
	var all []byte
	for i := 0; i < 5; i++ {
		all = append(all, searchMsg(uint32(i), "cap:a:mbox1")...)
	}
	a1.Write(all)
	a2.Write(all)
	testutil.WaitFor(t, 20*time.Second, "10 searches handled", func() bool { return w.srv.cnt.searches.Load()+w.srv.cnt.rateLimited.Load() == 10 })
	got := len(readResponses(t, a1, 200*time.Millisecond)) + len(readResponses(t, a2, 50*time.Millisecond))
	if got != 3 {
		t.Fatalf("source 127.0.0.1 got %d answers for 10 searches, want its burst of 3", got)
	}
	b.Write(searchMsg(9, "cap:b:mbox3"))
	if rs := readResponses(t, b, 200*time.Millisecond); len(rs) != 1 || rs[0].GUID != guidB {
		t.Fatalf("other source got %+v", rs)
	}
	clk.Advance(time.Second)
	a2.Write(all)
	testutil.WaitFor(t, 20*time.Second, "16 searches handled", func() bool { return w.srv.cnt.searches.Load()+w.srv.cnt.rateLimited.Load() == 16 })
	if rs := readResponses(t, a2, 200*time.Millisecond); len(rs) != 1 {
		t.Fatalf("after 1 s at 1/s: %d answers, want 1", len(rs))
	}
	if w.srv.cnt.rateLimited.Load() != 11 || w.srv.cnt.active.Load() != 3 || w.srv.cnt.decodeErrors.Load() != 0 {
		t.Errorf("stats %+v", metrics.Sprint(&w.srv.cnt))
	}
}

// A search with more names than MaxNamesPerSearch is answered for the
// first ones only; the rest are counted.
func TestNamesPerSearchBound(t *testing.T) {
	w := newWorld(t, Options{MaxNamesPerSearch: 2})
	nc := rawConnFrom(t, w.ep, lo1)
	nc.Write(searchMsg(1, "cap:a:mbox1", "cap:b:mbox3", "cap:a:mbox2", "x", "y"))
	rs := readResponses(t, nc, 300*time.Millisecond)
	cids := 0
	for _, r := range rs {
		for _, c := range r.CIDs {
			if c > 101 {
				t.Errorf("CID %d beyond the bound answered", c)
			}
			cids++
		}
	}
	if cids != 2 || w.srv.cnt.namesDropped.Load() != 3 || w.srv.cnt.names.Load() != 2 {
		t.Fatalf("cids %d stats %+v", cids, metrics.Sprint(&w.srv.cnt))
	}
}

// A denied name is never claimed over TCP, never waited for, and never
// pushed when a server registers it later; an allowed one still is.
func TestDeniedNameNotAnsweredNorPushed(t *testing.T) {
	testutil.CheckGoroutines(t)
	deny := func(n []byte) bool {
		return !bytes.HasPrefix(n, []byte("cap:a:")) && !bytes.HasPrefix(n, []byte("secret:"))
	}
	w := newWorldWith(t, Options{}, resolver.Options{NameAllowed: deny})
	nc := rawConnFrom(t, w.ep, lo1)
	nc.Write(searchMsg(1, "cap:a:mbox1", "secret:later", "open:later", "cap:b:mbox3"))
	rs := readResponses(t, nc, 300*time.Millisecond)
	if len(rs) != 1 || rs[0].GUID != guidB || len(rs[0].CIDs) != 1 || rs[0].CIDs[0] != 103 {
		t.Fatalf("answers %+v: want only cap:b:mbox3 (CID 103)", rs)
	}
	testutil.WaitFor(t, 20*time.Second, "a waiter registered", func() bool { return w.res.Stats().Waiting == 1 })
	w.addServer(t, pva.GUID{0xC}, netip.MustParseAddrPort("10.9.9.9:5075"), "secret:later", "open:later")
	rs = readResponses(t, nc, 300*time.Millisecond)
	if len(rs) != 1 || len(rs[0].CIDs) != 1 || rs[0].CIDs[0] != 102 {
		t.Fatalf("pushed %+v: want only open:later (CID 102)", rs)
	}
	// Asked again: the denied names stay unanswered though now held.
	nc.Write(searchMsg(2, "secret:later", "cap:a:mbox2"))
	if rs := readResponses(t, nc, 300*time.Millisecond); len(rs) != 0 {
		t.Fatalf("denied names answered: %+v", rs)
	}
	m := metrics.New("test")
	w.res.RegisterMetrics(m)
	if d, _ := m.Value(`pvans_access_denied_total{what="name"}`); d != 4 {
		t.Errorf("denied %v, want 4", d)
	}
}

// A refused client is logged at info, once per source per minute however
// often it retries (the counter counts every one).
func TestDeniedClientLoggedOncePerSourcePerMinute(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	clk := clock.NewFake(time.Unix(1000, 0))
	w := newWorld(t, Options{ClientAllowed: func(a netip.Addr) bool { return a != lo2 }, Logger: zap.New(core), Clock: clk})
	refused := func() {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(lo2, 0))}
		nc, err := d.Dial("tcp", w.ep.String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		nc.Read(make([]byte, 1)) // returns when closed
	}
	lines := func() []observer.LoggedEntry {
		return logs.FilterMessage("TCP client refused by access.tcp_client_allow").All()
	}
	for range 5 {
		refused()
	}
	testutil.WaitFor(t, 5*time.Second, "5 refusals counted", func() bool { return w.srv.cnt.denied.Load() == 5 })
	if l := lines(); len(l) != 1 || l[0].ContextMap()["client"] != lo2.String() {
		t.Fatalf("%d lines for 5 refusals from one source in a minute, want 1 naming %s: %v", len(l), lo2, l)
	}
	clk.Advance(time.Minute)
	refused()
	testutil.WaitFor(t, 5*time.Second, "a line a minute later", func() bool { return len(lines()) == 2 })
	if m := lines()[1].ContextMap(); m["more_since_last_line"] != uint64(4) {
		t.Fatalf("second line %v, want the 4 refusals not logged", m)
	}
}
