package resolver

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/registry"
)

// A pvAccessCPP client over UDP through restarts, as in the real-peer
// runs (results-new2, "Duplicate told entries"): it is answered, and at
// each restart it searches just before pvans sees the loss (answered the
// dead endpoint), then keeps searching during the outage (a waiter,
// searched through), and the new instance's listing answers it. Each
// restart must send it one answer for its CID, whatever the number of
// restarts, and what is remembered for it stays one entry. A UDP
// searcher's waiters live in a Client made anew each outage; a push to
// one was remembered like a TCP connection's answer, by that Client,
// never expiring: one more entry, and one more datagram, per restart,
// counted as TCP re-answers.
func TestUDPWaiterThroughRestartsOneAnswerEach(t *testing.T) {
	var pu udpPushes
	f := newFixture(t, registry.Options{}, Options{PushUDP: pu.push})
	f.res.SetSearcher(&searcher{})
	var udp udpSink
	f.res.SetUDPSink(udp.sink)
	to := UDPDest{To: netip.MustParseAddrPort("10.99.2.2:39175"), From: netip.MustParseAddr("10.99.2.1"), Pin: 2}
	q := query("cpp:a")
	search := func() {
		var b Batch
		f.res.Lookup(q, &b)
		for gi := range b.Groups {
			f.res.ToldUDP(to, q, &b, gi, b.Groups[gi].CIDs, OfferTCP)
		}
		f.res.WaitUDP(to.To, q, b.Missing, OfferTCP)
	}
	if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(101), Addr: addr(1)}, []string{"cpp:a"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	search()
	var answers, told, reTCP []int
	bad := false
	for i := 2; i <= 11; i++ {
		f.fc.Advance(10 * time.Second)
		search() // the race at the loss: told the dead endpoint
		f.reg.RemoveServer(guid(100 + i - 1))
		for range 3 {
			f.fc.Advance(400 * time.Millisecond)
			search()
		}
		if _, err := f.reg.Listed(registry.ServerInfo{GUID: guid(100 + i), Addr: addr(1)}, []string{"cpp:a"}, registry.SourceProbe); err != nil {
			t.Fatal(err)
		}
		pu.mu.Lock()
		n := len(pu.m[to.To]) + len(udp.got)
		pu.m, udp.got = nil, nil
		pu.mu.Unlock()
		st := f.res.Stats()
		answers, told, reTCP = append(answers, n), append(told, st.Told), append(reTCP, int(f.res.st.reTCP.Load()))
		bad = bad || n != 1 || st.Told > 1 || f.res.st.reTCP.Load() != 0
	}
	if bad {
		t.Fatalf("by restart: answers sent %v (want 1 each), answers remembered %v (want at most 1), TCP re-answers %v (want 0)",
			answers, told, reTCP)
	}
}
