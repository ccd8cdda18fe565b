package udpsearch

import (
	"fmt"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
)

// pacedHandler is a socketless handler whose replies are paced, with the
// immediate replies in now and the held ones, when due, in later.
func pacedHandler(t *testing.T, o Options, names int) (h *handler, st *counters, now, later *recSender, clk *clock.Fake) {
	t.Helper()
	clk = clock.NewFake(time.Time{})
	reg := map[string]resolver.Endpoint{}
	for i := range names {
		reg[fmt.Sprintf("p%04d", i)] = srvA
	}
	o.AnswerNames, o.Resolver, o.Clock = true, newMapResolver(reg), clk
	now, later = &recSender{}, &recSender{}
	h, st = testHandler(t, o, now)
	o.setDefaults()
	h.pace = newPacing(&o, st)
	h.pace.q.setSender(later)
	t.Cleanup(h.pace.close)
	return h, st, now, later, clk
}

// search37 is the i-th search of 37 names, all on one server: one reply
// of 37 CIDs, the CID of name k being k.
func search37(i int) []byte {
	s := &pva.Search{Seq: uint32(i + 1), ReplyPort: 40000, Protocols: [][]byte{[]byte("tcp")}}
	for k := i * 37; k < (i+1)*37; k++ {
		s.Names = append(s.Names, pva.SearchName{CID: uint32(k), Name: []byte(fmt.Sprintf("p%04d", k))})
	}
	return pva.AppendSearch(nil, pva.FlagBigEndian, s)
}

func namesIn(t *testing.T, rs []sentReply) int {
	n := 0
	for _, r := range rs {
		_, m := decodeResponse(t, r.b)
		n += len(m.CIDs)
	}
	return n
}

// A burst of replies to one client leaves at its pace: replies for the
// burst's names at once, then never more names than burst + rate × time,
// every reply sent in the end and in the order of the searches; another
// client is not held behind it.
func TestRepliesPacedPerClient(t *testing.T) {
	h, st, now, later, clk := pacedHandler(t, Options{ReplyRate: 1000, ReplyBurst: 100}, 37*20)
	for i := range 20 {
		h.handle(broadcastFrom(search37(i), lanC1))
	}
	if n := namesIn(t, now.replies); n != 74 {
		t.Fatalf("%d names answered at once, want 74 (two replies of 37 fit a burst of 100)", n)
	}
	h.handle(broadcastFrom(search37(0), lanC2))
	if n, _ := repliesTo(now, lanC2.Addr()); n != 1 {
		t.Fatal("another client waited behind the first")
	}
	for ms := 1; ms <= 700; ms++ {
		clk.Advance(time.Millisecond)
		if got, max := 74+namesIn(t, later.replies), 100+ms; got > max {
			t.Fatalf("after %d ms %d names sent, pace allows %d", ms, got, max)
		}
	}
	if n := namesIn(t, later.replies); n != 18*37 {
		t.Fatalf("%d names sent later, want %d", n, 18*37)
	}
	seq := uint32(0)
	for _, r := range later.replies {
		_, m := decodeResponse(t, r.b)
		if m.Seq < seq || r.to != lanC1 {
			t.Fatalf("reply out of order or misdirected: seq %d after %d to %v", m.Seq, seq, r.to)
		}
		seq = m.Seq
	}
	if st.repliesHeld.Load() != 18 || st.responses.Load() != 21 || st.dropReplyQueue.Load() != 0 || st.dropReplyHold.Load() != 0 {
		t.Fatalf("stats %+v", metrics.Sprint(st))
	}
}

// The replies held are bounded in bytes over all clients, and a reply
// that would wait beyond a second is dropped: the client has searched
// again by then. Both are counted.
func TestPacedRepliesBounded(t *testing.T) {
	h, st, now, later, clk := pacedHandler(t, Options{ReplyRate: 1000, ReplyBurst: 37, ReplyQueueBytes: 1000}, 37*20)
	for i := range 20 {
		h.handle(broadcastFrom(search37(i), lanC1))
	}
	if fit := uint64(1000 / len(now.replies[0].b)); st.repliesHeld.Load() != fit || st.dropReplyQueue.Load() != 19-fit {
		t.Fatalf("a 1,000-byte queue holds %d replies of %d bytes: %+v", fit, len(now.replies[0].b), metrics.Sprint(st))
	}
	clk.Advance(2 * time.Second)
	if uint64(len(later.replies)) != st.repliesHeld.Load() {
		t.Fatalf("%d held replies sent, %d held", len(later.replies), st.repliesHeld.Load())
	}

	h, st, _, _, _ = pacedHandler(t, Options{ReplyRate: 370, ReplyBurst: 37}, 37*20)
	for i := range 20 {
		h.handle(broadcastFrom(search37(i), lanC1))
	}
	// 37 names at once, then one reply of 37 each 100 ms: 10 held within
	// the second, the rest dropped.
	if st.repliesHeld.Load() != 10 || st.dropReplyHold.Load() != 9 || st.responses.Load() != 11 {
		t.Fatalf("hold bound: %+v", metrics.Sprint(st))
	}
}

// A client that searches again (its ring's next tick) while replies to it
// wait in the queue is not answered twice for the names those replies
// hold; names not held are answered, and once the held replies are gone
// a search is answered in full again.
func TestHeldNamesNotAnsweredTwice(t *testing.T) {
	h, st, now, later, clk := pacedHandler(t, Options{ReplyRate: 1000, ReplyBurst: 37}, 37*20)
	for i := range 4 {
		h.handle(broadcastFrom(search37(i), lanC1))
	}
	// Searches 1..3 are held; search 3 again, and 4 (never searched).
	h.handle(broadcastFrom(search37(3), lanC1))
	h.handle(broadcastFrom(search37(4), lanC1))
	if st.repliesHeld.Load() != 4 || st.claims.Load() != 5*37 {
		t.Fatalf("a repeated search while held: %+v", metrics.Sprint(st))
	}
	h.handle(broadcastFrom(search37(3), lanC2)) // another client: its own answer
	if n, _ := repliesTo(now, lanC2.Addr()); n != 1 {
		t.Fatal("another client's search was taken for a repeat")
	}
	clk.Advance(time.Second)
	if n := namesIn(t, now.replies) + namesIn(t, later.replies); n != 6*37 {
		t.Fatalf("%d names sent, want %d", n, 6*37)
	}
	h.handle(broadcastFrom(search37(3), lanC1))
	if st.claims.Load() != 7*37 {
		t.Fatalf("a search after the held replies left was not answered: %+v", metrics.Sprint(st))
	}
}
