package searchring

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
)

type resolution struct {
	name string
	guid pva.GUID
	ep   netip.AddrPort
}

type dup struct {
	name          string
	first, second pva.GUID
}

type callbacks struct {
	mu   sync.Mutex
	res  []resolution
	dups []dup
}

func (c *callbacks) options(o Options) Options {
	o.Resolved = func(name string, g pva.GUID, ep netip.AddrPort) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.res = append(c.res, resolution{name, g, ep})
	}
	o.Duplicate = func(name string, a, b pva.GUID) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.dups = append(c.dups, dup{name, a, b})
	}
	return o
}

func (c *callbacks) resolved() []resolution {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.res)
}

func guid(b byte) pva.GUID { return pva.GUID{0: b, 11: b} }

var (
	udpSrc = netip.MustParseAddrPort("127.0.0.5:5076")
	tcpSrc = netip.MustParseAddrPort("127.0.0.7:5075")
)

func claim(g pva.GUID, proto string, port uint16, cids ...uint32) *pva.SearchResponse {
	return &pva.SearchResponse{GUID: g, Seq: pva.SearchSeqFind, Addr: pva.AnyIPv4, Port: port,
		Protocol: []byte(proto), Found: true, CIDs: cids}
}

// searchedAfter reports whether name is searched in the next d.
func searchedAfter(clk interface{ Advance(time.Duration) }, rc *recorder, name string, d time.Duration) bool {
	n := len(rc.times(name))
	clk.Advance(d)
	return len(rc.times(name)) > n
}

func TestReplyRules(t *testing.T) {
	var cb callbacks
	ignored := guid(0xEE)
	r, clk, rc := newTestRing(t, cb.options(Options{IgnoreGUIDs: []pva.GUID{ignored}}))
	for _, n := range []string{"A", "B", "C", "D"} {
		r.Want(n)
	}
	clk.Advance(InitialDelay)
	cidA, cidB, cidC, cidD := rc.cidOf(t, "A"), rc.cidOf(t, "B"), rc.cidOf(t, "C"), rc.cidOf(t, "D")
	if len(map[uint32]bool{cidA: true, cidB: true, cidC: true, cidD: true}) != 4 {
		t.Fatal("CIDs not unique")
	}

	// Ignore-listed server: nothing happens, searching goes on.
	r.OnReply(udpSrc, ViaUDP, rc.claim(ignored, "tcp", 5075, cidA))
	// Negative reply (with CIDs, even): never stops a search.
	neg := rc.claim(guid(1), "tcp", 5075, cidA)
	neg.Found = false
	r.OnReply(udpSrc, ViaUDP, neg)
	// A protocol we did not search for.
	r.OnReply(udpSrc, ViaUDP, rc.claim(guid(1), "tls", 5076, cidA))
	r.OnReply(udpSrc, ViaUDP, rc.claim(guid(1), "udp", 5076, cidA))
	// UDP with port 0 names no endpoint (port 0 is only substituted over TCP).
	r.OnReply(udpSrc, ViaUDP, rc.claim(guid(1), "tcp", 0, cidA))
	if got := cb.resolved(); len(got) != 0 {
		t.Fatalf("resolved by a discarded reply: %+v", got)
	}
	if !searchedAfter(clk, rc, "A", 3*time.Second) {
		t.Fatal("A no longer searched after discarded replies")
	}
	if r.ctr.ignoredGUID.Load() != 1 || r.ctr.negative.Load() != 1 || r.ctr.badProtocol.Load() != 2 || r.ctr.unusable.Load() != 1 || r.ctr.resolved.Load() != 0 {
		t.Fatalf("stats %+v", metrics.Sprint(&r.ctr))
	}

	// First positive reply wins: zero address → datagram source.
	r.OnReply(udpSrc, ViaUDP, rc.claim(guid(1), "tcp", 5075, cidA, 0xDEAD))
	// Over TCP: zero port → the connection's port; a real address is kept.
	rb := rc.claim(guid(2), "tcp", 0, cidB)
	rb.Addr = pva.AddressFrom(netip.MustParseAddr("127.0.0.9"))
	r.OnReply(tcpSrc, ViaNameServer, rb)
	// Over TCP, zero address and zero port → the name server itself.
	r.OnReply(tcpSrc, ViaNameServer, rc.claim(guid(3), "tcp", 0, cidC))
	want := []resolution{
		{"A", guid(1), netip.MustParseAddrPort("127.0.0.5:5075")},
		{"B", guid(2), netip.MustParseAddrPort("127.0.0.9:5075")},
		{"C", guid(3), tcpSrc},
	}
	if got := cb.resolved(); !slices.Equal(got, want) {
		t.Fatalf("resolved %+v, want %+v", got, want)
	}
	// Same server again (UDP and TCP both answering): nothing new.
	r.OnReply(tcpSrc, ViaNameServer, rc.claim(guid(1), "tcp", 5075, cidA))
	// A second server claims A: reported, counted, not acted on.
	r.OnReply(udpSrc, ViaUDP, rc.claim(guid(9), "tcp", 5075, cidA))
	if len(cb.resolved()) != 3 {
		t.Fatalf("a later claim re-resolved: %+v", cb.resolved())
	}
	if !slices.Equal(cb.dups, []dup{{"A", guid(1), guid(9)}}) {
		t.Fatalf("duplicates %+v", cb.dups)
	}
	s := r.Stats()
	if r.ctr.resolved.Load() != 3 || r.ctr.duplicates.Load() != 1 || r.ctr.unknownCID.Load() != 1 || s.Searching != 1 || s.Channels != 4 {
		t.Fatalf("stats %+v %+v", s, metrics.Sprint(&r.ctr))
	}
	// Resolved names leave the ring; the unresolved one stays.
	rc.reset()
	clk.Advance(2 * time.Minute)
	for _, n := range []string{"A", "B", "C"} {
		if at := rc.times(n); len(at) != 0 {
			t.Fatalf("%s searched after it resolved: %v", n, at)
		}
	}
	if len(rc.times("D")) == 0 {
		t.Fatal("D stopped being searched")
	}
	if o := r.Occupancy(); sum(o) != 1 {
		t.Fatalf("occupancy %v, want only D", o)
	}
}

func sum(o [Buckets]int) int {
	n := 0
	for _, v := range o {
		n += v
	}
	return n
}

func TestTLSAcceptedOnlyWhenSearched(t *testing.T) {
	var cb callbacks
	r, clk, rc := newTestRing(t, cb.options(Options{Protocols: []string{"tls", "tcp"}}))
	r.Want("T")
	clk.Advance(InitialDelay)
	r.OnReply(udpSrc, ViaUDP, rc.claim(guid(4), "tls", 5076, rc.cidOf(t, "T")))
	if got := cb.resolved(); len(got) != 1 || got[0].ep.Port() != 5076 {
		t.Fatalf("tls claim: %+v", got)
	}
	if _, err := New(Options{Transport: rc, Protocols: []string{"udp"}}); err == nil {
		t.Fatal("unknown protocol accepted")
	}
	if _, err := New(Options{}); err == nil {
		t.Fatal("missing transport accepted")
	}
}

func TestUpstreamCopies(t *testing.T) {
	r, clk, rc := newTestRing(t, Options{ReplyPort: 0xBEEF})
	ap := func(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
	ok := &upstream{addr: ap("127.0.0.1:5075"), ready: true}
	atLimit := &upstream{addr: ap("127.0.0.2:5075"), ready: true, backlog: UpstreamBacklogLimit}
	notReady := &upstream{addr: ap("127.0.0.3:5075")}
	backlogged := &upstream{addr: ap("127.0.0.4:5075"), ready: true, backlog: UpstreamBacklogLimit + 1}
	rc.ups = []Upstream{ok, notReady, backlogged, atLimit}
	for i := range 100 {
		r.Want(pvName(i, 30))
	}
	clk.Advance(InitialDelay)
	udp := rc.datagrams()
	if len(udp) != 3 {
		t.Fatalf("%d datagrams for 100 names", len(udp))
	}
	for _, d := range udp {
		if d.flags != 0 || d.port != 0xBEEF {
			t.Fatalf("UDP datagram flags %#x port %#x", d.flags, d.port)
		}
	}
	for _, u := range []*upstream{ok, atLimit} {
		got := u.got()
		if len(got) != len(udp) {
			t.Fatalf("upstream got %d messages, want %d", len(got), len(udp))
		}
		var m pva.Search
		for i, msg := range got {
			if msg[2] != pva.FlagBigEndian {
				t.Fatalf("TCP copy header flags %#x, want BE client", msg[2])
			}
			if binary.BigEndian.Uint32(msg[4:]) != uint32(len(msg)-pva.HeaderSize) {
				t.Fatal("TCP copy length field")
			}
			s, err := decodeSearch(msg, &m)
			if err != nil {
				t.Fatal(err)
			}
			if s.flags != pva.SearchUnicast || s.port != 0 {
				t.Fatalf("TCP copy flags %#x port %d, want 0x80 and 0", s.flags, s.port)
			}
			if !slices.Equal(s.names, udp[i].names) || !slices.Equal(s.cids, udp[i].cids) {
				t.Fatalf("TCP copy %d names differ from the UDP datagram", i)
			}
		}
	}
	if len(notReady.got()) != 0 || len(backlogged.got()) != 0 {
		t.Fatal("sent to a not-ready or backlogged upstream")
	}
	if r.ctr.upstreamSent.Load() != 6 || r.ctr.upstreamSkipped.Load() != 3 {
		t.Fatalf("stats %+v", metrics.Sprint(&r.ctr))
	}
	// The same, per name server, and per UDP destination.
	for _, c := range []struct {
		u    *upstream
		want DestinationStats
	}{
		{ok, DestinationStats{Sent: 3}}, {atLimit, DestinationStats{Sent: 3}},
		{notReady, DestinationStats{}}, {backlogged, DestinationStats{Skipped: 3}},
	} {
		if got := r.UpstreamDestination(c.u.addr); got != c.want {
			t.Errorf("name server %v: %+v, want %+v", c.u.addr, got, c.want)
		}
	}
	if got := r.UDPDestination(recorderDest); got != (DestinationStats{Sent: 3}) {
		t.Errorf("UDP destination: %+v, want 3 sent", got)
	}
	if got := r.UpstreamDestination(recorderDest); got != (DestinationStats{}) {
		t.Errorf("a UDP destination counted as a name server: %+v", got)
	}
}

func TestDropHonoursSweepDelay(t *testing.T) {
	cases := []struct {
		name    string
		opts    Options
		stopped time.Duration // when searching stops after Drop
	}{
		{"default one sweep", Options{}, DefaultSweepDelay},
		{"spec two sweeps", Options{SweepPasses: 2}, 2 * DefaultSweepDelay},
		{"short", Options{SweepDelay: 3 * time.Second}, 3 * time.Second},
		{"immediate", Options{SweepDelay: -1}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var cb callbacks
			r, clk, rc := newTestRing(t, cb.options(tc.opts))
			r.Want("GONE")
			r.Want("KEPT")
			clk.Advance(10 * time.Minute) // saturated: searched every 30 s
			cid := rc.cidOf(t, "GONE")
			r.Drop("GONE")
			if tc.stopped > 0 {
				clk.Advance(tc.stopped - time.Millisecond)
				if s := r.Stats(); s.Channels != 2 || s.Dropped != 1 {
					t.Fatalf("swept early: %+v", s)
				}
				clk.Advance(time.Millisecond)
			}
			if s := r.Stats(); s.Channels != 1 || s.Searching != 1 || r.ctr.swept.Load() != 1 || s.Dropped != 0 {
				t.Fatalf("not swept on time: %+v", s)
			}
			rc.reset()
			clk.Advance(2 * time.Minute)
			if at := rc.times("GONE"); len(at) != 0 {
				t.Fatalf("GONE searched after the sweep: %v", at)
			}
			if len(rc.times("KEPT")) != 4 {
				t.Fatalf("KEPT searched %v", rc.times("KEPT"))
			}
			r.OnReply(udpSrc, ViaUDP, rc.claim(guid(1), "tcp", 5075, cid))
			if len(cb.resolved()) != 0 || r.ctr.unknownCID.Load() != 1 {
				t.Fatal("a swept Channel's CID still resolves")
			}
			if o := r.Occupancy(); sum(o) != 1 {
				t.Fatalf("occupancy %v", o)
			}
		})
	}
}

// Dropped then wanted again before the sweep: the same Channel goes on,
// keeping its CID and its place in the backoff.
func TestWantBeforeSweepKeepsChannel(t *testing.T) {
	r, clk, rc := newTestRing(t, Options{})
	r.Want("X")
	clk.Advance(20 * time.Second)
	cid, attempts := rc.cidOf(t, "X"), attemptsOf(r, "X")
	r.Drop("X")
	clk.Advance(5 * time.Second)
	r.Want("X")
	clk.Advance(time.Minute)
	if s := r.Stats(); r.ctr.swept.Load() != 0 || s.Channels != 1 || s.Initial != 0 {
		t.Fatalf("stats %+v", s)
	}
	d := rc.datagrams()
	last := d[len(d)-1]
	if last.cids[0] != cid || attemptsOf(r, "X") <= attempts {
		t.Fatalf("CID %d (was %d), attempts %d (was %d)", last.cids[0], cid, attemptsOf(r, "X"), attempts)
	}
}

func TestReenterOffsets(t *testing.T) {
	for _, tc := range []struct {
		why   Reason
		first time.Duration // from Reenter (half-way between ticks) to the next search
	}{
		{ReenterLost, ms(500)},
		{ReenterConnectFailed, 10*time.Second + ms(500)},
		{ReenterRefused, 29*time.Second + ms(500)},
	} {
		t.Run(tc.why.String(), func(t *testing.T) {
			var cb callbacks
			r, clk, rc := newTestRing(t, cb.options(Options{}))
			r.Want("P")
			clk.Advance(3 * time.Minute)
			r.OnReply(udpSrc, ViaUDP, rc.claim(guid(1), "tcp", 5075, rc.cidOf(t, "P")))
			if r.Reenter("P", tc.why) != true {
				t.Fatal("Reenter refused for a resolved name")
			}
			if r.Reenter("P", tc.why) || r.Reenter("nope", tc.why) {
				t.Fatal("Reenter accepted for a searching or unknown name")
			}
			clk.Advance(ms(500))
			rc.reset()
			start := clk.Now().Sub(rc.start)
			clk.Advance(2 * time.Minute)
			at := rc.times("P")
			var delays []time.Duration
			prev := start
			for _, a := range at[:5] {
				delays = append(delays, a-prev)
				prev = a
			}
			// Backoff restarts: 1 s, 2 s, 3 s after the first search.
			want := []time.Duration{tc.first, secs(1), secs(2), secs(3), secs(4)}
			if !slices.Equal(delays, want) {
				t.Fatalf("delays %v, want %v", delays, want)
			}
			// The next claim wins again, from a new server, without a duplicate.
			r.OnReply(udpSrc, ViaUDP, rc.claim(guid(2), "tcp", 5075, rc.cidOf(t, "P")))
			if got := cb.resolved(); len(got) != 2 || got[1].guid != guid(2) || len(cb.dups) != 0 {
				t.Fatalf("after re-entry: %+v dups %+v", got, cb.dups)
			}
			if r.ctr.reentered.Load() != 1 {
				t.Fatal("re-entry not counted")
			}
		})
	}
}

// A stale entry left in a bucket by a resolved Channel must not make the
// re-entered Channel search twice per revolution.
func TestReenterDoesNotDoubleSearch(t *testing.T) {
	r, clk, rc := newTestRing(t, Options{})
	r.Want("P")
	clk.Advance(10 * time.Minute)
	cid := rc.cidOf(t, "P")
	r.OnReply(udpSrc, ViaUDP, rc.claim(guid(1), "tcp", 5075, cid))
	r.Reenter("P", ReenterRefused)
	rc.reset()
	clk.Advance(10 * time.Minute)
	at := rc.times("P")
	for i := 1; i < len(at); i++ {
		if at[i] == at[i-1] {
			t.Fatalf("searched twice at %v", at[i])
		}
	}
	if last := at[len(at)-1] - at[len(at)-2]; last != 30*time.Second {
		t.Fatalf("saturated interval %v", last)
	}
}

// Wanting a name that resolved earlier and was not swept yet restarts its
// search as a new one.
func TestWantResolvedRestarts(t *testing.T) {
	var cb callbacks
	r, clk, rc := newTestRing(t, cb.options(Options{}))
	r.Want("R")
	clk.Advance(time.Minute)
	r.OnReply(udpSrc, ViaUDP, rc.claim(guid(1), "tcp", 5075, rc.cidOf(t, "R")))
	rc.reset()
	r.Want("R")
	clk.Advance(InitialDelay)
	if at := rc.times("R"); len(at) != 1 {
		t.Fatalf("re-wanted name searched %v", at)
	}
	r.OnReply(udpSrc, ViaUDP, rc.claim(guid(2), "tcp", 5075, rc.cidOf(t, "R")))
	if got := cb.resolved(); len(got) != 2 || len(cb.dups) != 0 {
		t.Fatalf("%+v %+v", got, cb.dups)
	}
}

// ReenterServer puts back exactly the names resolved to that server: the
// names another server holds, still-searching names and names the ring
// never resolved are untouched.
func TestReenterServer(t *testing.T) {
	var cb callbacks
	r, clk, rc := newTestRing(t, cb.options(Options{}))
	for _, n := range []string{"a1", "a2", "b1", "s1"} {
		r.Want(n)
	}
	clk.Advance(time.Minute)
	r.OnReply(udpSrc, ViaUDP, rc.claim(guid(1), "tcp", 5075, rc.cidOf(t, "a1"), rc.cidOf(t, "a2")))
	r.OnReply(udpSrc, ViaUDP, rc.claim(guid(2), "tcp", 5076, rc.cidOf(t, "b1")))
	if n := r.ReenterServer(guid(3), ReenterLost); n != 0 {
		t.Fatalf("re-entered %d names of an unknown server", n)
	}
	if n := r.ReenterServer(guid(1), ReenterLost); n != 2 {
		t.Fatalf("re-entered %d names, want a1 and a2", n)
	}
	if s := r.Stats(); s.Searching != 3 || r.ctr.reentered.Load() != 2 {
		t.Fatalf("stats %+v", s)
	}
	rc.reset()
	clk.Advance(time.Second)
	got := map[string]bool{}
	for _, d := range rc.datagrams() {
		for _, n := range d.names {
			got[n] = true
		}
	}
	if !got["a1"] || !got["a2"] || got["b1"] {
		t.Fatalf("searched at the next tick: %v, want a1 and a2 (lost while active) and not b1", got)
	}
	// Re-entered twice is still one Channel each; the second call finds
	// nothing resolved.
	if n := r.ReenterServer(guid(1), ReenterLost); n != 0 {
		t.Fatalf("re-entered %d names already searching", n)
	}
}

// The trust rule: a reply counts only when it echoes the sequence ID of a search
// that carried the CID; CIDs and the first sequence ID are random, so a
// sender that never saw a search cannot forge a matching reply by counting
// from 1 or using PVXS's constant "find".
func TestReplyMustMatchASearch(t *testing.T) {
	var cb callbacks
	r, clk, rc := newTestRing(t, cb.options(Options{}))
	for _, n := range []string{"A", "B", "C"} {
		r.Want(n)
	}
	clk.Advance(InitialDelay)
	cid := rc.cidOf(t, "A")
	for _, guess := range []uint32{1, 2, 3} {
		r.OnReply(udpSrc, ViaUDP, claim(guid(6), "tcp", 5075, guess)) // counted CIDs
	}
	forged := claim(guid(6), "tcp", 5075, cid) // the right CID, PVXS's constant sequence ID
	if rc.claim(guid(6), "tcp", 5075, cid).Seq == pva.SearchSeqFind {
		t.Fatal("the ring searches with PVXS's constant sequence ID")
	}
	r.OnReply(udpSrc, ViaUDP, forged)
	if got := cb.resolved(); len(got) != 0 {
		t.Fatalf("unmatched reply resolved %v", got)
	}
	// The three guesses name no CID searched; all four are hints dropped
	// as unmatched.
	if r.ctr.unknownCID.Load() != 3 || r.ctr.unmatched.Load() != 4 {
		t.Fatalf("stats %+v", metrics.Sprint(&r.ctr))
	}
	// The reply to a later search of the same name still matches an
	// earlier search (kept: the last few).
	first := rc.claim(guid(1), "tcp", 5075, cid)
	clk.Advance(secs(3)) // searched again, with new sequence IDs
	r.OnReply(udpSrc, ViaUDP, first)
	if got := cb.resolved(); len(got) != 1 || got[0].name != "A" {
		t.Fatalf("resolved %v", got)
	}

	// Two rings draw different CIDs and sequence IDs.
	r2, clk2, rc2 := newTestRing(t, Options{})
	r2.Want("A")
	clk2.Advance(InitialDelay)
	if c2 := rc2.cidOf(t, "A"); c2 == cid || c2 < 4 && cid < 4 {
		t.Fatalf("CIDs %d and %d: not random", cid, c2)
	}
	if s1, s2 := first.Seq, rc2.claim(guid(1), "tcp", 1, rc2.cidOf(t, "A")).Seq; s1 == s2 {
		t.Fatalf("both rings started at sequence ID %#x", s1)
	}
}
