package udpsearch

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
)

// A unicast search is forwarded only while another socket shares the
// search port; the count is asked again when older than the interval,
// after a local server's beacon, and never needed after a copy from
// another forwarder. Every search is answered either way.
func TestForwardOnlyWhenThePortIsShared(t *testing.T) {
	out := &recSender{}
	h, st := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry()}, out)
	clk := clock.NewFake(time.Unix(1000, 0))
	others, asked := 0, 0
	var countErr error
	h.peers = &portPeers{count: func() (int, error) { asked++; return others, countErr },
		clk: clk, every: time.Second, st: &st.fwdCounters, log: h.o.Logger}
	search := func() (forwards, replies int) {
		t.Helper()
		out.reset()
		h.handle(&datagram{b: mustHex(t, capSearch), src: netip.MustParseAddrPort("127.0.0.1:43027"), dst: ipLo, ifIndex: 1})
		return len(out.forwards), len(out.replies)
	}
	step := func(name string, wantFwd, wantAsked int) {
		t.Helper()
		if f, r := search(); f != wantFwd || r != 2 || asked != wantAsked {
			t.Fatalf("%s: %d forwards, %d replies, asked %d times; want %d forwards, 2 replies, asked %d", name, f, r, asked, wantFwd, wantAsked)
		}
	}
	step("alone", 0, 1)
	step("alone, count fresh", 0, 1)
	others = 1
	step("a peer appeared, count not yet stale", 0, 1)
	clk.Advance(time.Second)
	step("count stale: asked again", 1, 2)
	others = 0
	clk.Advance(time.Second)
	step("peer gone", 0, 3)

	// A local server's beacon makes the next search ask again.
	others = 1
	h.handle(&datagram{b: pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer, &pva.Beacon{GUID: guidA, Addr: pva.AnyIPv4, Port: 5075, Protocol: "tcp"}),
		src: netip.MustParseAddrPort("127.0.0.1:5076"), dst: ipLo, ifIndex: 1})
	step("after a local beacon", 1, 4)
	// A remote server's beacon does not.
	others = 0
	clk.Advance(time.Second)
	step("peer gone again", 0, 5)
	others = 1
	h.handle(&datagram{b: pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer, &pva.Beacon{GUID: guidA, Addr: pva.AnyIPv4, Port: 5075, Protocol: "tcp"}),
		src: netip.MustParseAddrPort("10.0.0.9:5076"), dst: ipEthBc, ifIndex: 2})
	step("after a remote beacon", 0, 5)

	// A copy forwarded by someone else proves a peer without asking.
	out.reset()
	h.handle(&datagram{b: mustHex(t, capForward), src: netip.MustParseAddrPort("127.0.0.1:5076"), dst: ForwardGroup, ifIndex: 1})
	step("after another forwarder's copy", 1, 5)

	// A count that fails means forward.
	others, countErr = 0, errors.New("no sock_diag")
	clk.Advance(time.Second)
	step("count failed", 1, 6)
	if st.forwardsSkipped.Load() != 6 || st.forwards.Load() != 4 || st.peerChecks.Load() != 6 || st.peerCheckErrors.Load() != 1 {
		t.Fatalf("stats %+v", metrics.Sprint(&st.fwdCounters))
	}
}
