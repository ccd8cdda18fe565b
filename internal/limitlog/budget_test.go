package limitlog

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pvans-project/pvans/internal/clock"
)

// TestBudgetBoundsAFlood is issue 39 row 1: forged beacons from 4,000
// addresses each made a "server appeared" line. Within one interval a
// message is written LinesPerInterval times; at the interval's end one
// summary says how many were not written (the metric counts them), and a
// rare message beside the flood is written as always.
func TestBudgetBoundsAFlood(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	clk := clock.NewFake(time.Unix(1000, 0))
	l, b := Logger(zap.New(core).Named("daemon"), 0, 0, clk)
	for i := range 4000 {
		src := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		l.Info("server appeared", zap.Stringer("endpoint", netip.AddrPortFrom(src, 5075)))
		if i%1000 == 0 {
			l.With(zap.String("part", "probe")).Warn("server unlistable", zap.Stringer("endpoint", src))
		}
		clk.Advance(time.Millisecond) // 4,000 in 4 s: one interval
	}
	l.Info("configuration reloaded")
	if n := logs.FilterMessage("server appeared").Len(); n != LinesPerInterval {
		t.Fatalf("%d \"server appeared\" lines for 4,000 sources in one interval, want %d", n, LinesPerInterval)
	}
	if logs.FilterMessage("server unlistable").Len() != 4 || logs.FilterMessage("configuration reloaded").Len() != 1 {
		t.Fatal("a rare message beside the flood was not written")
	}
	if logs.FilterMessage(SummaryMessage).Len() != 0 {
		t.Fatal("a summary before the interval ended")
	}
	if b.Suppressed() != 4000-LinesPerInterval {
		t.Fatalf("metric: %d suppressed, want %d", b.Suppressed(), 4000-LinesPerInterval)
	}
	// The flood stops; the interval ends: one summary, with the count,
	// at the flooded message's logger and level.
	clk.Advance(Interval)
	sums := logs.FilterMessage(SummaryMessage).All()
	if len(sums) != 1 {
		t.Fatalf("%d summaries, want 1", len(sums))
	}
	f := sums[0].ContextMap()
	if f["message"] != "server appeared" || f["not_written"] != uint64(4000-LinesPerInterval) ||
		sums[0].LoggerName != "daemon" || sums[0].Level != zapcore.InfoLevel {
		t.Fatalf("summary %v %v %v", sums[0].LoggerName, sums[0].Level, f)
	}
	// A new interval writes again.
	l.Info("server appeared")
	if n := logs.FilterMessage("server appeared").Len(); n != LinesPerInterval+1 {
		t.Fatalf("next interval: %d lines in all", n)
	}
}

// TestBudgetLinesPerSecondAllMessages: whatever mix of messages (a text
// built at run time included), the lines in an interval are at most
// (LinesPerInterval + 1 summary) per tracked message plus the shared
// budget beyond MaxMessages.
func TestBudgetLinesPerSecondAllMessages(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	clk := clock.NewFake(time.Unix(1000, 0))
	l, b := Logger(zap.New(core), 0, 0, clk)
	const n = 100000
	for i := range n {
		l.Warn(fmt.Sprintf("HTTP server: TLS handshake error from 10.0.%d.%d", i>>8&255, i&255))
		l.Debug("probe failed")
	}
	clk.Advance(Interval)
	bound := (MaxMessages + 1) * (LinesPerInterval + 1)
	if logs.Len() > bound {
		t.Fatalf("%d lines in one interval, bound %d", logs.Len(), bound)
	}
	if written := uint64(logs.Len() - logs.FilterMessage(SummaryMessage).Len()); written+b.Suppressed() != 2*n {
		t.Fatalf("%d written + %d suppressed != %d", written, b.Suppressed(), 2*n)
	}
	// A line disabled by the level costs no budget.
	core2, logs2 := observer.New(zapcore.InfoLevel)
	l2, b2 := Logger(zap.New(core2), 0, 0, clk)
	for range 1000 {
		l2.Debug("probe failed")
	}
	l2.Info("probe failed")
	if logs2.Len() != 1 || b2.Suppressed() != 0 {
		t.Fatalf("disabled debug lines: %d written, %d suppressed", logs2.Len(), b2.Suppressed())
	}
}

// Close writes the summary of an interval still open at once, and no
// summary is written after it: a daemon's logger outlived by its budget's
// timer wrote to a test's log after the test had ended, which panics the
// test binary.
func TestBudgetCloseWritesPendingSummaries(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	clk := clock.NewFake(time.Unix(1000, 0))
	l, b := Logger(zap.New(core), 0, 0, clk)
	for range LinesPerInterval + 5 {
		l.Info("server appeared")
	}
	if logs.FilterMessage(SummaryMessage).Len() != 0 {
		t.Fatal("a summary before the interval ended")
	}
	b.Close()
	sums := logs.FilterMessage(SummaryMessage).All()
	if len(sums) != 1 || sums[0].ContextMap()["not_written"] != uint64(5) {
		t.Fatalf("summaries at Close: %v, want one of 5 lines", sums)
	}
	for range LinesPerInterval {
		l.Info("server appeared") // beyond the budget still, after Close
	}
	clk.Advance(10 * Interval)
	if n := logs.FilterMessage(SummaryMessage).Len(); n != 1 {
		t.Fatalf("%d summaries after Close and the interval's end, want only Close's", n)
	}
	if b.Suppressed() != 5+LinesPerInterval {
		t.Fatalf("%d suppressed, want %d", b.Suppressed(), 5+LinesPerInterval)
	}
}
