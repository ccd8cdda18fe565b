package pvaconn

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
)

// TestControlMessagesDoNotExtendAMessage: a first segment that never gets
// its last, kept company by control messages and middle segments, used to
// hold a connection open past the message timeout because every completed
// piece restarted it. The timer runs from the first byte of a
// message to its last segment.
func TestControlMessagesDoNotExtendAMessage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		filler []byte
	}{
		{"control", pva.AppendSetByteOrder(nil, 0)},
		{"middle segment", pva.AppendMessage(nil, pva.FlagSegMiddle, pva.CmdRPC, []byte("more"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, cc := loopPair(t)
			cnt := new(Counters)
			const tmo = 300 * time.Millisecond
			c := Serve(sc, Options{MessageTimeout: tmo, IdleTimeout: time.Minute, Counters: cnt}, newRecorder())
			defer c.Close()
			cc.Write(pva.AppendClientValidation(nil, 0, &pva.ClientValidation{AuthMethod: "anonymous"}))
			cc.Write(pva.AppendMessage(nil, pva.FlagSegFirst, pva.CmdRPC, []byte("start")))
			every(t, cc, 20*time.Millisecond, tc.filler)
			start := time.Now()
			select {
			case <-c.Done():
			case <-time.After(20 * tmo):
				t.Fatalf("connection still open %v after a segment sequence started (timeout %v); %+v", time.Since(start), tmo, metrics.Sprint(cnt))
			}
			if err := c.Err(); err != ErrMessageTimeout || cnt.MessageTimeouts.Load() != 1 {
				t.Fatalf("closed with %v, counters %+v; want the message timeout", err, metrics.Sprint(cnt))
			}
		})
	}
}

// TestHeaderClaimDoesNotAllocate: an 8-byte header announcing a message of
// the largest accepted size used to allocate the whole buffer at once —
// 10,000 connections × 128 KiB from 80 KB sent. The buffer grows
// only as bytes arrive, and before the handshake no message may exceed
// MaxPreHandshake.
func TestHeaderClaimDoesNotAllocate(t *testing.T) {
	ln := listen(t)
	const conns = 64
	const claim = 128 << 10
	hdr := pva.AppendHeader(nil, pva.Header{Command: pva.CmdConnectionValidation, Size: claim})
	served := make(chan *Conn, conns)
	cnt := new(Counters)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			served <- Serve(nc, Options{MaxMessage: 1 << 20, Counters: cnt}, newRecorder())
		}
	}()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var clients []net.Conn
	var cs []*Conn
	for i := 0; i < conns; i++ {
		cc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cc)
		cc.Write(hdr)
		cc.Write(make([]byte, 100)) // a little of the promised payload
		cs = append(cs, <-served)
	}
	// Let every server read what was sent (and refuse it).
	for deadline := time.Now().Add(10 * time.Second); cnt.Oversize.Load() < conns && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	runtime.ReadMemStats(&after)
	for _, cc := range clients {
		cc.Close()
	}
	for _, c := range cs {
		<-c.Done()
	}
	got := after.TotalAlloc - before.TotalAlloc
	// Each connection keeps its 16 KiB read buffer and small bookkeeping;
	// the claims (64 × 128 KiB = 8 MiB) must not show.
	if limit := uint64(conns * (readBufSize + 16<<10)); got > limit {
		t.Fatalf("%d connections each announcing %d bytes allocated %d bytes; want < %d", conns, claim, got, limit)
	}
	if cnt.Oversize.Load() != conns {
		t.Fatalf("pre-handshake oversize messages counted %d, want %d (%+v)", cnt.Oversize.Load(), conns, metrics.Sprint(cnt))
	}
}

// TestBufferGrowsWithArrivedBytes: after the handshake a large message is
// still accepted, the buffer growing with the bytes that actually arrived.
func TestBufferGrowsWithArrivedBytes(t *testing.T) {
	rd := &reader{buf: make([]byte, readBufSize)}
	c := &Conn{opt: Options{MaxMessage: 1 << 20, Role: Server}.withDefaults()}
	c.cnt = c.opt.Counters
	rd.isValidated = true
	h := pva.AppendHeader(nil, pva.Header{Command: pva.CmdRPC, Size: 1 << 20})
	rd.w = copy(rd.buf, h)
	rd.w += 100
	if _, err := c.parse(rd); err != nil {
		t.Fatal(err)
	}
	if len(rd.buf) != readBufSize {
		t.Fatalf("buffer grew to %d on a header's claim; want it to stay %d until full", len(rd.buf), readBufSize)
	}
	rd.w = len(rd.buf) // the buffer filled up
	if _, err := c.parse(rd); err != nil {
		t.Fatal(err)
	}
	if len(rd.buf) > growFactor*readBufSize {
		t.Fatalf("buffer grew to %d after %d bytes; want at most %d times what arrived", len(rd.buf), readBufSize, growFactor)
	}
	// A message within growFactor × the base buffer is one allocation.
	rd2 := &reader{buf: make([]byte, readBufSize), isValidated: true}
	h2 := pva.AppendHeader(nil, pva.Header{Command: pva.CmdRPC, Size: 100 << 10})
	rd2.w = copy(rd2.buf, h2)
	rd2.w = len(rd2.buf)
	if _, err := c.parse(rd2); err != nil {
		t.Fatal(err)
	}
	if len(rd2.buf) != 8+100<<10 {
		t.Fatalf("a 100 KiB message grew the buffer to %d; want its size in one step", len(rd2.buf))
	}
}
