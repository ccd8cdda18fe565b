package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/sim"
)

// Probe failures shown to operators are categories, never raw errors.
func TestCategory(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	_, refused := net.Dial("tcp", closed)
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{refused, FailRefused},
		{ctx.Err(), FailTimeout},
		{fmt.Errorf("dial: %w", context.DeadlineExceeded), FailTimeout},
		{pvaconn.ErrIdleTimeout, FailTimeout},
		{io.EOF, FailNotPVA},
		{pvaconn.ErrHandshakeTimeout, FailNotPVA},
		{errConnLost, FailNotPVA},
		{&ListError{Step: "create channel", Status: pva.Status{Type: pva.StatusFatal}}, FailUnlistable},
		{errors.New("anything else"), FailNotPVA},
	} {
		if got := Category(c.err); got != c.want {
			t.Errorf("Category(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// Confirm: a TCP search answered under the right GUID confirms the names
// the endpoint claims; another GUID, or no server, confirms nothing.
func TestConfirm(t *testing.T) {
	srv := startServer(t, sim.Options{}, "c:a", "c:b")
	p := newProber(t, Options{Clock: clock.NewFake(time.Time{}), Sink: newSink()})
	confirm := func(g pva.GUID, ep netip.AddrPort, names ...string) []string {
		ch := make(chan []string, 1)
		p.Confirm(g, ep, names, func(ok []string) { ch <- ok })
		select {
		case ok := <-ch:
			return ok
		case <-time.After(10 * time.Second):
			t.Fatal("Confirm never finished")
		}
		return nil
	}
	if ok := confirm(srv.GUID(), srv.Addr(), "c:a", "nope", "c:b"); !slices.Equal(ok, []string{"c:a", "c:b"}) {
		t.Fatalf("confirmed %v", ok)
	}
	if ok := confirm(pva.GUID{0xBA, 0xD}, srv.Addr(), "c:a"); len(ok) != 0 {
		t.Fatalf("another GUID confirmed %v", ok)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close()
	if ok := confirm(srv.GUID(), closed, "c:a"); len(ok) != 0 {
		t.Fatalf("nothing listening, confirmed %v", ok)
	}
	if p.stats.VerifyConfirmed.Load() != 1 || p.stats.VerifyRefuted.Load() != 2 {
		t.Fatalf("stats %+v", metrics.Sprint(&p.stats))
	}
}

// A static server that goes away (its watch connection ends and it cannot
// be reached) is reported lost like any other: its names do not stay for
// ever just because it is configured (the trust rule).
func TestStaticServerGoneIsLost(t *testing.T) {
	srv := startServer(t, sim.Options{}, "st:a")
	k := newSink()
	p := newProber(t, Options{Clock: clock.NewFake(time.Time{}), Sink: k})
	p.SetStatic([]netip.AddrPort{srv.Addr()})
	g := srv.GUID()
	if r := k.next(t, "listed", 5*time.Second); r.guid != g {
		t.Fatalf("listed %+v", r)
	}
	srv.Close()
	if r := k.next(t, "lost", 5*time.Second); r.guid != g {
		t.Fatalf("lost %+v", r)
	}
	k.none(t, 300*time.Millisecond)
}
