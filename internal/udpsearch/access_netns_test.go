//go:build linux

package udpsearch

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/testutil"
)

func portOf(c *net.UDPConn) uint16 { return c.LocalAddr().(*net.UDPAddr).AddrPort().Port() }

var lo5076 = netip.MustParseAddrPort("127.0.0.1:5076")

// Over loopback sockets: a search from a denied source (127.0.0.2) gets no
// answer at all, while an allowed one (127.0.0.1) is answered.
func TestDeniedUDPSourceOnTheWire(t *testing.T) {
	ns := newNetns(t)
	denied := netip.MustParseAddr("127.0.0.2")
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true, Resolver: threeServers(),
		ClientAllowed: func(a netip.Addr) bool { return a != denied }})
	bad, good := udpIn(t, ns, "127.0.0.2:0"), udpIn(t, ns, "127.0.0.1:0")
	bad.WriteToUDPAddrPort(searchMsg(pva.SearchUnicast|pva.SearchMustReply, netip.Addr{}, portOf(bad), []string{"tcp"}, "a"), lo5076)
	good.WriteToUDPAddrPort(searchMsg(pva.SearchUnicast, netip.Addr{}, portOf(good), []string{"tcp"}, "a"), lo5076)
	if got := collect(good, 300*time.Millisecond, 1); len(got) != 1 {
		t.Fatalf("allowed source: %d answers", len(got))
	}
	if got := collect(bad, 200*time.Millisecond, 0); len(got) != 0 {
		t.Fatalf("denied source got %d answers", len(got))
	}
	if s.st.dropDenied.Load() != 1 {
		t.Fatalf("stats %+v", metrics.Sprint(&s.st))
	}
}

// A flood from one source beyond its rate yields exactly its burst of
// answers (the fake clock does not refill it); another source is answered
// during the flood.
func TestUDPFloodIsRateLimitedPerSource(t *testing.T) {
	ns := newNetns(t)
	const burst, flood = 5, 200
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true, Resolver: threeServers(),
		Clock: clock.NewFake(time.Time{}), InterfaceRefresh: -1, SearchRate: 1, SearchBurst: burst})
	flooder, other := udpIn(t, ns, "127.0.0.1:0"), udpIn(t, ns, "127.0.0.2:0")
	fmsg := searchMsg(pva.SearchUnicast|pva.SearchMustReply, netip.Addr{}, portOf(flooder), []string{"tcp"}, "a")
	for range flood {
		flooder.WriteToUDPAddrPort(fmsg, lo5076)
	}
	other.WriteToUDPAddrPort(searchMsg(pva.SearchUnicast, netip.Addr{}, portOf(other), []string{"tcp"}, "b"), lo5076)
	testutil.WaitFor(t, 5*time.Second, "the flood to be handled", func() bool { return s.st.dropRateLimited.Load() >= flood-burst })
	if got := collect(other, 300*time.Millisecond, 1); len(got) != 1 {
		t.Fatalf("other source: %d answers during the flood", len(got))
	}
	got := collect(flooder, 300*time.Millisecond, 0)
	if len(got) != burst {
		t.Fatalf("flooder: %d answers to %d searches, want %d", len(got), flood, burst)
	}
	if s.st.dropRateLimited.Load() != flood-burst || s.st.kernelDrops.Load() != 0 {
		t.Fatalf("stats %+v", metrics.Sprint(&s.st))
	}
}

// The reflection cap on the wire: a client whose every search draws three
// replies receives at most ratio × the bytes it sent.
func TestUDPReflectionCapOnTheWire(t *testing.T) {
	ns := newNetns(t)
	const ratio = 1.5
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true, Resolver: threeServers(),
		ReflectionRatio: ratio, ReflectionWindow: time.Minute})
	c := udpIn(t, ns, "127.0.0.1:0")
	msg := searchMsg(pva.SearchUnicast, netip.Addr{}, portOf(c), []string{"tcp"}, "a", "b", "c")
	const n = 20
	for range n {
		c.WriteToUDPAddrPort(msg, lo5076)
	}
	testutil.WaitFor(t, 5*time.Second, "the searches to be handled", func() bool { return s.st.responses.Load()+s.st.reflectionCapped.Load() == 3*n })
	got, bytes := collect(c, 300*time.Millisecond, 0), 0
	for _, m := range got {
		bytes += len(m.b)
	}
	sent := n * len(msg)
	t.Logf("sent %d bytes, received %d replies, %d bytes", sent, len(got), bytes)
	if float64(bytes) > ratio*float64(sent) {
		t.Fatalf("%d reply bytes for %d search bytes: over ratio %v", bytes, sent, ratio)
	}
	if len(got) == 0 || len(got) == 3*n {
		t.Fatalf("%d replies: the cap should bind but not starve", len(got))
	}
	if int(s.st.reflectionCapped.Load()) != 3*n-len(got) {
		t.Fatalf("capped %d, received %d of %d", s.st.reflectionCapped.Load(), len(got), 3*n)
	}
}
