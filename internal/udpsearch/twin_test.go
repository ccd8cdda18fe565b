package udpsearch

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/twin"
)

// tcpSink stands for a client's TCP name-server connection.
type tcpSink struct {
	got  [][]byte
	full bool
}

func (s *tcpSink) offer(b []byte) bool {
	if s.full {
		return false
	}
	s.got = append(s.got, append([]byte(nil), b...))
	return true
}

func (s *tcpSink) names(t *testing.T) int {
	n := 0
	for _, b := range s.got {
		_, m := decodeResponse(t, b)
		n += len(m.CIDs)
	}
	return n
}

// pairingHandler is pacedHandler's handler (37 names at once, then 370 a
// second, for 20 searches of 37) with a pairing table, its held replies
// handed over at a pair, and udp.answer_over_tcp set to on.
func pairingHandler(t *testing.T, on bool) (h *handler, st *counters, now, later *recSender, clk *clock.Fake, tw *twin.Table) {
	t.Helper()
	h, st, now, later, clk = pacedHandler(t, Options{ReplyRate: 370, ReplyBurst: 37}, 37*20)
	tw = twin.New(clk, twin.Options{})
	tw.OnPair(h.pace.onPair)
	pairingOn(h, tw, on)
	return h, st, now, later, clk, tw
}

// pairingOn gives h the production setting udp.answer_over_tcp.
func pairingOn(h *handler, tw *twin.Table, on bool) {
	h.o.Twins = tw
	p := *h.pol.Load()
	p.AnswerOverTCP = on
	h.pol.Store(&p)
}

// pvxs37 is search37(i) as a PVXS client sends it: the sequence of
// every search is "find" (client.cpp tickSearch), the only form pvans
// pairs (twin.Fingerprint).
func pvxs37(i int) []byte {
	b := search37(i)
	binary.BigEndian.PutUint32(b[pva.HeaderSize:], pva.SearchSeqFind)
	return b
}

// tcpCopy is the fingerprint of pvxs37(i) as a PVXS client sends it to
// its name server: the unicast flag set, the response port zeroed.
func tcpCopy(t *testing.T, tw *twin.Table, i int) uint64 {
	t.Helper()
	_, udpPayload, _, _ := pva.SplitMessage(pvxs37(i))
	var s pva.Search
	if err := s.Decode(udpPayload, true); err != nil {
		t.Fatal(err)
	}
	s.ReplyPort, s.Flags = 0, pva.SearchUnicast
	_, p, _, _ := pva.SplitMessage(pva.AppendSearch(nil, pva.FlagBigEndian, &s))
	fp, ok := tw.Fingerprint(p)
	if !ok {
		t.Fatal("no fingerprint")
	}
	return fp
}

// A big client whose host has a TCP name-server connection: the replies
// beyond its pace are stashed, not dropped, and once the connection shows
// it is the client's own (the same search over it), everything held or
// stashed goes over it, and later searches are answered over it alone.
func TestPairedClientAnsweredOverTCP(t *testing.T) {
	h, st, now, later, clk, tw := pairingHandler(t, true)
	var conn tcpSink
	c := tw.Join(lanC1.Addr(), conn.offer)
	for i := range 20 {
		h.handle(broadcastFrom(pvxs37(i), lanC1))
	}
	// 37 at once, ten replies held within the second, nine stashed
	// instead of dropped.
	if st.repliesHeld.Load() != 10 || st.repliesStashed.Load() != 9 || st.dropReplyHold.Load() != 0 || len(now.replies) != 1 {
		t.Fatalf("before the pair: %+v, %d sent", metrics.Sprint(st), len(now.replies))
	}
	clk.Advance(200 * time.Millisecond) // two held replies leave over UDP
	c.TCPSearch(tcpCopy(t, tw, 0))
	if n := conn.names(t); n != 17*37 {
		t.Fatalf("%d names moved to the connection at the pair, want %d", n, 17*37)
	}
	clk.Advance(3 * time.Second)
	if n := namesIn(t, now.replies) + namesIn(t, later.replies) + conn.names(t); n != 20*37 {
		t.Fatalf("%d names answered in all, want %d (none twice, none lost)", n, 20*37)
	}
	sentUDP := len(now.replies) + len(later.replies)
	h.handle(broadcastFrom(pvxs37(3), lanC1))
	if len(now.replies)+len(later.replies) != sentUDP || conn.names(t) != 18*37 {
		t.Fatalf("a paired client's search was not answered over its connection alone: udp %d->%d, tcp names %d %+v", sentUDP, len(now.replies)+len(later.replies), conn.names(t), metrics.Sprint(st))
	}
	if st.repliesOverTCP.Load() != 1 || st.repliesDiverted.Load() != 17 || st.dropReplyHold.Load() != 0 {
		t.Fatalf("after the pair: %+v", metrics.Sprint(st))
	}
	// A full connection: the socket takes the reply.
	conn.full = true
	h.handle(broadcastFrom(pvxs37(4), lanC1))
	if len(now.replies)+len(later.replies) == sentUDP {
		t.Fatal("a reply the connection had no room for was not sent over UDP")
	}
	// The connection ends: the client is answered over UDP again.
	c.Leave()
	sentUDP = len(now.replies) + len(later.replies)
	clk.Advance(3 * time.Second)
	h.handle(broadcastFrom(pvxs37(5), lanC1))
	if len(now.replies) == sentUDP-len(later.replies) {
		t.Fatal("not answered over UDP after the connection ended")
	}
}

// A stash that no pair claims is dropped when due, as the reply would
// have been, never sent late over UDP; it does not stop a search again
// from being answered.
func TestStashWithoutPairDropped(t *testing.T) {
	h, st, now, later, clk, tw := pairingHandler(t, true)
	tw.Join(lanC1.Addr(), (&tcpSink{}).offer) // another process's connection
	for i := range 20 {
		h.handle(broadcastFrom(pvxs37(i), lanC1))
	}
	if st.repliesStashed.Load() != 9 {
		t.Fatalf("%+v", metrics.Sprint(st))
	}
	clk.Advance(time.Second + 500*time.Millisecond)
	h.handle(broadcastFrom(pvxs37(19), lanC1)) // stashed, searched again
	if st.claims.Load() != 21*37 {
		t.Fatalf("a stashed name was not answered again: %+v", metrics.Sprint(st))
	}
	clk.Advance(3 * time.Second)
	if n := namesIn(t, now.replies) + namesIn(t, later.replies); n != 12*37 {
		t.Fatalf("%d names sent over UDP, want %d (stashed replies never sent)", n, 12*37)
	}
	if st.dropReplyHold.Load() != 9 {
		t.Fatalf("stashed replies not counted as dropped: %+v", metrics.Sprint(st))
	}
}

// A forwarded copy (the datagram's source is the forwarder, not the
// client) and a search from another host pair nothing.
func TestPairOnlyFromTheClientsOwnAddress(t *testing.T) {
	h, st, _, _, _, tw := pairingHandler(t, true)
	var conn tcpSink
	c := tw.Join(lanC1.Addr(), conn.offer)
	// lanC2 names lanC1 as its reply address.
	msg := searchMsg(0, lanC1.Addr(), lanC1.Port(), []string{"tcp"}, "p0001")
	h.handle(broadcastFrom(msg, lanC2))
	_, p, _, _ := pva.SplitMessage(msg)
	fp, _ := tw.Fingerprint(p)
	c.TCPSearch(fp)
	if tw.Stats().Paired != 0 {
		t.Fatal("paired from a search another host sent in the client's name")
	}
	if st.repliesOverTCP.Load() != 0 {
		t.Fatalf("%+v", metrics.Sprint(st))
	}
}

// udp.answer_over_tcp false: the same client is answered over UDP only,
// paced and dropped as without a connection, and nothing is stashed.
func TestAnswerOverTCPOff(t *testing.T) {
	h, st, now, _, _, tw := pairingHandler(t, false)
	var conn tcpSink
	c := tw.Join(lanC1.Addr(), conn.offer)
	for i := range 20 {
		h.handle(broadcastFrom(pvxs37(i), lanC1))
	}
	c.TCPSearch(tcpCopy(t, tw, 0))
	h.handle(broadcastFrom(pvxs37(0), lanC2))
	if st.repliesStashed.Load() != 0 || st.dropReplyHold.Load() != 9 || st.repliesOverTCP.Load() != 0 || len(conn.got) != 0 || len(now.replies) != 2 {
		t.Fatalf("answered otherwise than over UDP alone: %+v, %d over TCP", metrics.Sprint(st), len(conn.got))
	}
}

// lookupHook runs before each lookup: the moment between a search's
// pairing check and its replies.
type lookupHook struct {
	Resolver
	before func()
}

func (r *lookupHook) Lookup(q []pva.SearchName, b *resolver.Batch) {
	if f := r.before; f != nil {
		r.before = nil
		f()
	}
	r.Resolver.Lookup(q, b)
}

// The pair can be made on the connection's goroutine while the socket's
// goroutine answers a search it found unpaired: a reply it stashes after
// the pair's divert must still go over the connection, not wait to be
// dropped.
func TestStashAfterThePairIsDiverted(t *testing.T) {
	h, st, now, later, clk, tw := pairingHandler(t, true)
	var conn tcpSink
	c := tw.Join(lanC1.Addr(), conn.offer)
	for i := range 19 {
		h.handle(broadcastFrom(pvxs37(i), lanC1))
	}
	hook := &lookupHook{Resolver: h.o.Resolver}
	hook.before = func() { c.TCPSearch(tcpCopy(t, tw, 0)) }
	h.o.Resolver = hook
	h.handle(broadcastFrom(pvxs37(19), lanC1))
	clk.Advance(3 * time.Second)
	if n := namesIn(t, now.replies) + namesIn(t, later.replies) + conn.names(t); n != 20*37 {
		t.Fatalf("%d names answered in all, want %d: %+v", n, 20*37, metrics.Sprint(st))
	}
}

// Another process on the client's host (or behind the same NAT address)
// sends a search from its own socket naming the client's port as its reply
// port, and the same bytes over its own connection: the client's socket
// must not be paired with that connection, or the client's answers would
// go to it. A PVXS client's searches leave from the socket its replies
// come to.
func TestPairOnlyFromTheSocketItself(t *testing.T) {
	h, _, _, _, _, tw := pairingHandler(t, true)
	var victim, intruder tcpSink
	tw.Join(lanC1.Addr(), victim.offer)
	c := tw.Join(lanC1.Addr(), intruder.offer)
	other := netip.AddrPortFrom(lanC1.Addr(), lanC1.Port()+1)
	h.handle(broadcastFrom(pvxs37(0), other)) // reply port: lanC1's
	c.TCPSearch(tcpCopy(t, tw, 0))
	if tw.Stats().Paired != 0 {
		t.Fatal("the client's socket paired with a connection by a search from another socket")
	}
	h.handle(broadcastFrom(pvxs37(1), lanC1))
	if n := len(intruder.got); n != 0 {
		t.Fatalf("%d of the client's answers went over another process's connection", n)
	}
}
