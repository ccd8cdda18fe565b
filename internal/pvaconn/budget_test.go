package pvaconn

import (
	"net"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
)

// TestBudgetBoundsAllConnections: per-connection bounds multiply by the
// number of connections (10,000 × 1 MiB of send queue at defaults); a
// shared Budget bounds what peers that do not read, or that start large
// messages, make a listener buffer in total. Connections over it are closed
// and counted; a connection within BudgetFreeSend is never charged; every
// byte is given back when connections end.
func TestBudgetBoundsAllConnections(t *testing.T) {
	const limit = 512 << 10
	b := new(Budget)
	b.SetMax(limit)
	cnt := new(Counters)
	ln := listen(t)
	served := make(chan *Conn, 64)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			served <- Serve(nc, Options{MaxMessage: 1 << 20, SendQueueBytes: 1 << 20, Budget: b, Counters: cnt}, newRecorder())
		}
	}()
	var cs []*Conn
	var peers []net.Conn
	val := pva.AppendClientValidation(nil, 0, &pva.ClientValidation{AuthMethod: "anonymous"})
	for i := 0; i < 16; i++ {
		cc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		(cc.(*net.TCPConn)).SetReadBuffer(4096) // a peer that does not read
		cc.Write(val)
		peers = append(peers, cc)
		cs = append(cs, <-served)
	}
	// Half the peers start 900 KB messages (the read side), all are sent
	// replies they never read (the send side).
	for i, cc := range peers[:8] {
		_ = i
		cc.Write(pva.AppendHeader(nil, pva.Header{Command: pva.CmdRPC, Size: 900 << 10}))
		cc.Write(make([]byte, 300<<10))
	}
	reply := pva.AppendMessage(nil, pva.FlagServer, pva.CmdRPC, make([]byte, 16<<10))
	peak := int64(0)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		for _, c := range cs {
			c.Send(reply)
		}
		peak = max(peak, b.Used())
		time.Sleep(5 * time.Millisecond)
	}
	if peak > limit {
		t.Fatalf("budget use peaked at %d, bound %d", peak, limit)
	}
	if cnt.BudgetExceeded.Load() == 0 {
		t.Fatalf("no connection closed at the budget (peak %d); %+v", peak, metrics.Sprint(cnt))
	}
	for _, c := range cs {
		c.Close()
		<-c.Done()
	}
	if u := b.Used(); u != 0 {
		t.Fatalf("%d bytes still charged after every connection ended", u)
	}
	t.Logf("peak %d of %d; %d connections closed at the budget", peak, limit, cnt.BudgetExceeded.Load())
}

// TestBudgetFreeAllowance: a connection queueing less than BudgetFreeSend
// is not charged, so a budget exhausted by others never closes it.
func TestBudgetFreeAllowance(t *testing.T) {
	b := new(Budget)
	b.SetMax(1) // exhausted from the start
	sc, cc := loopPair(t)
	(cc.(*net.TCPConn)).SetReadBuffer(4096)
	c := Serve(sc, Options{Budget: b}, newRecorder())
	defer c.Close()
	if err := c.Send(make([]byte, BudgetFreeSend/2)); err != nil {
		t.Fatalf("send within the free allowance: %v", err)
	}
	if b.Used() != 0 {
		t.Fatalf("charged %d for a queue within the allowance", b.Used())
	}
}
