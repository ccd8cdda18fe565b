package udpsearch

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/testutil"
)

// Capture blocks #3 (pvxget's unicast search to 127.0.0.1:5076 from
// 127.0.0.1:43027), #4 (the forwarded copy) and #5 (server A's answer).
const (
	capSearch = `ca 02 80 03 00 00 00 41 66 69 6e 64 80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
		a8 13 01 03 74 63 70 00 02 12 34 56 78 0b 63 61 70 3a 62 3a 6d 62 6f 78 33 12 34 56 79 0b 63 61
		70 3a 61 3a 6d 62 6f 78 31`
	capForward = `ca 02 80 16 00 00 00 10 00 00 00 00 00 00 00 00 00 00 ff ff 7f 00 00 01 ca 02 80 03 00 00 00 41
		66 69 6e 64 00 00 00 00 00 00 00 00 00 00 00 00 00 00 ff ff 7f 00 00 01 a8 13 01 03 74 63 70 00
		02 12 34 56 78 0b 63 61 70 3a 62 3a 6d 62 6f 78 33 12 34 56 79 0b 63 61 70 3a 61 3a 6d 62 6f 78
		31`
	capAnswerA = `ca 02 c0 04 00 00 00 2d 84 36 c7 fc 29 7c b7 3e 27 d1 e8 6b 66 69 6e 64 00 00 00 00 00 00 00 00
		00 00 ff ff 00 00 00 00 13 d3 03 74 63 70 01 00 01 12 34 56 79`
)

var (
	guidA = pva.GUID{0x84, 0x36, 0xc7, 0xfc, 0x29, 0x7c, 0xb7, 0x3e, 0x27, 0xd1, 0xe8, 0x6b}
	guidB = pva.GUID{0x89, 0xe4, 0xcb, 0x73, 0x34, 0x5d, 0xc9, 0x8f, 0x69, 0xf6, 0x12, 0xab}
	srvA  = resolver.Endpoint{GUID: guidA, Addr: netip.MustParseAddrPort("127.0.0.1:5075"), Protocol: "tcp"}
	srvB  = resolver.Endpoint{GUID: guidB, Addr: netip.MustParseAddrPort("127.0.0.1:5085"), Protocol: "tcp"}
)

func captureRegistry() *mapResolver {
	return newMapResolver(map[string]resolver.Endpoint{"cap:a:mbox1": srvA, "cap:a:mbox2": srvA, "cap:b:mbox3": srvB})
}

// The literals above are the repository's capture, byte for byte, and
// guidA, guidB are its servers A and B (beacons #2 and #1).
func TestCaptureLiteralsAreTheRecording(t *testing.T) {
	cap := testutil.CaptureBlocks(t)
	for n, lit := range map[int]string{3: capSearch, 4: capForward, 5: capAnswerA} {
		if got := mustHex(t, lit); !bytes.Equal(got, cap[n]) {
			t.Errorf("block #%d\n got %x\nwant %x", n, got, cap[n])
		}
	}
	if !bytes.Equal(cap[2][8:20], guidA[:]) || !bytes.Equal(cap[1][8:20], guidB[:]) {
		t.Errorf("GUIDs %v %v, beacons say %x %x", guidA, guidB, cap[2][8:20], cap[1][8:20])
	}
}

func TestUnicastSearchIsForwardedAsPVXSDoes(t *testing.T) {
	out := &recSender{}
	h, st := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry()}, out)
	h.handle(&datagram{b: mustHex(t, capSearch), src: netip.MustParseAddrPort("127.0.0.1:43027"), dst: ipLo, ifIndex: 1})
	if len(out.forwards) != 1 || !bytes.Equal(out.forwards[0], mustHex(t, capForward)) {
		t.Fatalf("forward = %x\nwant      %x", out.forwards, mustHex(t, capForward))
	}
	if st.forwards.Load() != 1 || st.searches.Load() != 1 {
		t.Fatalf("stats %+v", metrics.Sprint(st))
	}
}

// pvans answers a unicast search it forwards from the original, exactly as
// it used to answer its own forwarded copy (capture #4): same bytes, same
// destination, same source address and interface.
func TestUnicastAnsweredFromOriginalAsFromCopy(t *testing.T) {
	fromOrig, fromCopy := &recSender{}, &recSender{}
	h1, st := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry()}, fromOrig)
	h2, _ := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry()}, fromCopy)
	h1.handle(&datagram{b: mustHex(t, capSearch), src: netip.MustParseAddrPort("127.0.0.1:43027"), dst: ipLo, ifIndex: 1})
	h2.handle(&datagram{b: mustHex(t, capForward), src: netip.MustParseAddrPort("127.0.0.1:5076"), dst: ForwardGroup, ifIndex: 1})
	if len(fromOrig.replies) != 2 || !slices.EqualFunc(fromOrig.replies, fromCopy.replies, func(a, b sentReply) bool {
		return bytes.Equal(a.b, b.b) && a.to == b.to && a.from == b.from && a.ifIndex == b.ifIndex
	}) {
		t.Fatalf("from the original %+v\nfrom the copy %+v", fromOrig.replies, fromCopy.replies)
	}
	if st.responses.Load() != 2 || st.searches.Load() != 1 || st.searchNames.Load() != 2 {
		t.Fatalf("one pass: %+v", metrics.Sprint(st))
	}
}

// pvans's own forward, looped back from the group, is dropped before it
// is read: recognised by the forwarder socket's address alone.
func TestOwnForwardedCopyDroppedUnread(t *testing.T) {
	out := &recSender{}
	h, st := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry()}, out)
	h.ownSrc = netip.MustParseAddrPort("127.0.0.1:41000")
	for _, b := range [][]byte{mustHex(t, capForward), {0xde, 0xad}} {
		h.handle(&datagram{b: b, src: h.ownSrc, dst: ForwardGroup, ifIndex: 1})
	}
	if st.ownCopies.Load() != 2 || st.searches.Load() != 0 || st.dropMalformed.Load() != 0 || len(out.replies)+len(out.forwards) != 0 {
		t.Fatalf("stats %+v, sent %+v", metrics.Sprint(st), out)
	}
	// Another forwarder's copy (another port) is answered.
	h.handle(&datagram{b: mustHex(t, capForward), src: netip.MustParseAddrPort("127.0.0.1:5076"), dst: ForwardGroup, ifIndex: 1})
	if len(out.replies) != 2 {
		t.Fatalf("another forwarder's copy: %d replies", len(out.replies))
	}
}

func TestForwardedCopyIsAnsweredPerServer(t *testing.T) {
	out := &recSender{}
	h, _ := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry()}, out)
	h.handle(&datagram{b: mustHex(t, capForward), src: netip.MustParseAddrPort("127.0.0.1:5076"), dst: ForwardGroup, ifIndex: 1})
	if len(out.forwards) != 0 {
		t.Fatal("a forwarded search was forwarded again")
	}
	if len(out.replies) != 2 {
		t.Fatalf("want one reply per server (2), got %d", len(out.replies))
	}
	for _, r := range out.replies {
		if r.to != netip.MustParseAddrPort("127.0.0.1:43027") || r.from != ipLo || r.ifIndex != 1 {
			t.Errorf("reply to %v from %v via %d", r.to, r.from, r.ifIndex)
		}
	}
	// Server A's answer is PVXS's byte for byte except the address: pvans
	// names the real server instead of "my source address".
	want := mustHex(t, capAnswerA)
	loAddr := pva.AddressFrom(ipLo)
	copy(want[8+16:8+32], loAddr[:])
	if !bytes.Equal(out.replies[1].b, want) && !bytes.Equal(out.replies[0].b, want) {
		t.Fatalf("no reply equals\n%x\ngot\n%x\n%x", want, out.replies[0].b, out.replies[1].b)
	}
	_, m := decodeResponse(t, out.replies[0].b)
	if m.GUID != guidB || m.Port != 5085 || !slices.Equal(m.CIDs, []uint32{0x12345678}) {
		t.Fatalf("server B answer %+v", m)
	}
}

func TestAppendResponseMatchesCodec(t *testing.T) {
	m := &pva.SearchResponse{GUID: guidA, Seq: 7, Addr: pva.AddressFrom(ipEth), Port: 5075, Protocol: []byte("tcp"), Found: true, CIDs: []uint32{1, 2, 3}}
	want := pva.AppendSearchResponse(nil, pva.FlagBigEndian|pva.FlagServer, m)
	got := appendResponse(nil, m.GUID, m.Seq, m.Addr, m.Port, "tcp", m.CIDs)
	if !bytes.Equal(got, want) {
		t.Fatalf("got %x want %x", got, want)
	}
	m.Found, m.CIDs = false, nil
	want = pva.AppendSearchResponse(nil, pva.FlagBigEndian|pva.FlagServer, m)
	if got := appendResponse(nil, m.GUID, m.Seq, m.Addr, m.Port, "tcp", nil); !bytes.Equal(got, want) {
		t.Fatalf("negative: got %x want %x", got, want)
	}
}

func TestBroadcastSearchAnsweredFromInterfaceAddress(t *testing.T) {
	out := &recSender{}
	h, _ := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry()}, out)
	msg := searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1", "nobody:has:this")
	src := netip.MustParseAddrPort("10.0.0.9:5555")
	h.handle(&datagram{b: msg, src: src, dst: ipEthBc, ifIndex: 2})
	if len(out.forwards) != 0 {
		t.Fatal("broadcast search forwarded")
	}
	if len(out.replies) != 1 {
		t.Fatalf("replies = %d", len(out.replies))
	}
	r := out.replies[0]
	if r.to != netip.MustParseAddrPort("10.0.0.9:40000") || r.from != ipEth || r.ifIndex != 2 {
		t.Fatalf("reply to %v from %v via %d", r.to, r.from, r.ifIndex)
	}
	_, m := decodeResponse(t, r.b)
	// Server A is known as 127.0.0.1:5075 (it announced itself over
	// loopback); a remote client is told "any" + port, which it reads as
	// this reply's source (ipEth), not its own loopback.
	if m.GUID != guidA || !m.Addr.IsAny() || m.Port != 5075 || !m.Found || !slices.Equal(m.CIDs, []uint32{0x12345678}) {
		t.Fatalf("response %+v", m)
	}
}

func TestSearchArrivingOnSecondLinkAnsweredFromIt(t *testing.T) {
	out := &recSender{}
	h, _ := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry()}, out)
	msg := searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "cap:b:mbox3")
	// A search to a multicast group or other non-local address on eth1 is
	// treated as broadcast: answered from eth1's first address.
	h.handle(&datagram{b: msg, src: netip.MustParseAddrPort("10.1.0.9:5555"), dst: netip.MustParseAddr("239.1.2.3"), ifIndex: 3})
	if len(out.replies) != 1 || out.replies[0].from != ipEth2 || out.replies[0].ifIndex != 3 {
		t.Fatalf("replies %+v", out.replies)
	}
}

func TestAnswerRules(t *testing.T) {
	src := netip.MustParseAddrPort("10.0.0.9:5555")
	cases := []struct {
		name       string
		opts       Options
		msg        []byte
		wantGUIDs  []pva.GUID
		wantFound  bool
		wantPort   uint16
		wantPinged bool
	}{
		{name: "nothing found, no MustReply: silence",
			opts: Options{AnswerNames: true}, msg: searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "x:y")},
		{name: "nothing found, MustReply: found=0 with own identity",
			opts: Options{AnswerNames: true}, msg: searchMsg(pva.SearchMustReply, netip.Addr{}, 40000, []string{"tcp"}, "x:y"),
			wantGUIDs: []pva.GUID{ownGUID}, wantPort: 5075},
		{name: "discovery ping with MustReply",
			opts: Options{AnswerNames: true}, msg: searchMsg(pva.SearchMustReply, netip.Addr{}, 40000, nil),
			wantGUIDs: []pva.GUID{ownGUID}, wantPort: 5075, wantPinged: true},
		{name: "discovery ping without MustReply: silence",
			opts: Options{AnswerNames: true}, msg: searchMsg(0, netip.Addr{}, 40000, nil)},
		{name: "policy off: registry names not answered",
			opts: Options{AnswerNames: false}, msg: searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1")},
		{name: "policy off, MustReply: negative only",
			opts: Options{AnswerNames: false}, msg: searchMsg(pva.SearchMustReply, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1"),
			wantGUIDs: []pva.GUID{ownGUID}, wantPort: 5075},
		{name: "held name answered with the real server",
			opts: Options{AnswerNames: true}, msg: searchMsg(pva.SearchMustReply, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1"),
			wantGUIDs: []pva.GUID{guidA}, wantFound: true, wantPort: 5075},
		{name: "protocol list without tcp: no claim",
			opts: Options{AnswerNames: true}, msg: searchMsg(0, netip.Addr{}, 40000, []string{"udp"}, "cap:a:mbox1")},
		{name: "ignored source, any port",
			opts: Options{AnswerNames: true, IgnoreAddrs: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.9:0")}},
			msg:  searchMsg(pva.SearchMustReply, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1")},
		{name: "ignored source, exact port",
			opts: Options{AnswerNames: true, IgnoreAddrs: []netip.AddrPort{src}},
			msg:  searchMsg(pva.SearchMustReply, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1")},
		{name: "ignore entry for another port does not match",
			opts: Options{AnswerNames: true, IgnoreAddrs: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.9:1")}},
			msg:  searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1"), wantGUIDs: []pva.GUID{guidA}, wantFound: true, wantPort: 5075},
		{name: "reply address is a broadcast address: refused",
			opts: Options{AnswerNames: true}, msg: searchMsg(pva.SearchMustReply, ipEthBc, 40000, []string{"tcp"}, "cap:a:mbox1")},
		{name: "reply port 0: refused",
			opts: Options{AnswerNames: true}, msg: searchMsg(pva.SearchMustReply, netip.Addr{}, 0, []string{"tcp"}, "cap:a:mbox1")},
		{name: "interface not in Interfaces: not answered",
			opts: Options{AnswerNames: true, Interfaces: []netip.Addr{ipEth2}},
			msg:  searchMsg(pva.SearchMustReply, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1")},
		{name: "interface in Interfaces: answered",
			opts: Options{AnswerNames: true, Interfaces: []netip.Addr{ipEth}},
			msg:  searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1"), wantGUIDs: []pva.GUID{guidA}, wantFound: true, wantPort: 5075},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := &recSender{}
			c.opts.GUID, c.opts.TCPPort, c.opts.Resolver = ownGUID, 5075, captureRegistry()
			h, st := testHandler(t, c.opts, out)
			h.handle(&datagram{b: c.msg, src: src, dst: ipEthBc, ifIndex: 2})
			if len(out.replies) != len(c.wantGUIDs) {
				t.Fatalf("replies = %d, want %d", len(out.replies), len(c.wantGUIDs))
			}
			for i, r := range out.replies {
				_, m := decodeResponse(t, r.b)
				if m.GUID != c.wantGUIDs[i] || m.Found != c.wantFound || m.Port != c.wantPort || string(m.Protocol) != "tcp" || m.Seq != pva.SearchSeqFind {
					t.Errorf("reply %d: %+v", i, m)
				}
				if !c.wantFound && len(m.CIDs) != 0 {
					t.Errorf("negative reply carries CIDs %v", m.CIDs)
				}
			}
			if got := st.discoveryPings.Load() == 1; got != c.wantPinged {
				t.Errorf("discovery ping counted = %v", got)
			}
		})
	}
}

// The four forwarding safety rules, plus the zero-reply rule
// (docs/protocol.md, "Forwarding safety rules"), at the handler: each
// offending datagram is neither forwarded nor answered.
func TestSafetyRules(t *testing.T) {
	search := searchMsg(pva.SearchMustReply|pva.SearchUnicast, ipEth, 40000, []string{"tcp"}, "cap:a:mbox1")
	tagged := func(tag netip.Addr, inner []byte) []byte {
		return append(pva.AppendOriginTag(nil, pva.FlagBigEndian, pva.AddressFrom(tag)), inner...)
	}
	loSrc := netip.MustParseAddrPort("127.0.0.1:5076")
	cases := []struct {
		name string
		d    datagram
		drop func(*counters) uint64
	}{
		{"tag arriving by unicast on loopback", datagram{b: tagged(ipLo, search), src: loSrc, dst: ipLo, ifIndex: 1},
			func(c *counters) uint64 { return c.dropTagNotForwarded.Load() }},
		{"tag arriving on a LAN", datagram{b: tagged(ipLo, search), src: netip.MustParseAddrPort("10.0.0.9:5076"), dst: ipEthBc, ifIndex: 2},
			func(c *counters) uint64 { return c.dropTagNotForwarded.Load() }},
		{"tag to the group on a non-loopback interface", datagram{b: tagged(ipLo, search), src: netip.MustParseAddrPort("10.0.0.9:5076"), dst: ForwardGroup, ifIndex: 2},
			func(c *counters) uint64 { return c.dropTagNotForwarded.Load() }},
		{"two tags", datagram{b: tagged(ipLo, tagged(ipLo, search)), src: loSrc, dst: ForwardGroup, ifIndex: 1},
			func(c *counters) uint64 { return c.dropSecondTag.Load() }},
		{"tag naming a foreign address", datagram{b: tagged(netip.MustParseAddr("192.0.2.1"), search), src: loSrc, dst: ForwardGroup, ifIndex: 1},
			func(c *counters) uint64 { return c.dropTagForeign.Load() }},
		{"multicast source", datagram{b: search, src: netip.MustParseAddrPort("224.0.0.1:5076"), dst: ipLo, ifIndex: 1},
			func(c *counters) uint64 { return c.dropMulticastSource.Load() }},
		{"forwarded search with zero reply address", datagram{b: tagged(ipLo, searchMsg(pva.SearchMustReply, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1")), src: loSrc, dst: ForwardGroup, ifIndex: 1},
			func(c *counters) uint64 { return c.dropForwardedZero.Load() }},
		{"untagged forwarded search with zero reply address", datagram{b: searchMsg(pva.SearchMustReply, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1"), src: loSrc, dst: ForwardGroup, ifIndex: 1},
			func(c *counters) uint64 { return c.dropForwardedZero.Load() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := &recSender{}
			h, st := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry(), GUID: ownGUID}, out)
			h.handle(&c.d)
			if len(out.forwards)+len(out.replies) != 0 {
				t.Fatalf("sent %d forwards, %d replies", len(out.forwards), len(out.replies))
			}
			if c.drop(st) != 1 {
				t.Fatalf("drop not counted: %+v", metrics.Sprint(st))
			}
		})
	}
	// Rule 3: an already-forwarded search (arriving via the group) is
	// answered but never forwarded again, even with the Unicast flag set.
	out := &recSender{}
	h, _ := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry(), GUID: ownGUID}, out)
	h.handle(&datagram{b: tagged(ipLo, search), src: loSrc, dst: ForwardGroup, ifIndex: 1})
	h.handle(&datagram{b: search, src: loSrc, dst: ForwardGroup, ifIndex: 1})
	if len(out.forwards) != 0 || len(out.replies) != 2 {
		t.Fatalf("forwarded copies: %d forwards, %d replies", len(out.forwards), len(out.replies))
	}
}

func TestOnlyFirstMessageIsProcessed(t *testing.T) {
	out := &recSender{}
	h, _ := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry(), GUID: ownGUID}, out)
	first := searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "x:none")
	second := searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1")
	h.handle(&datagram{b: append(first, second...), src: netip.MustParseAddrPort("10.0.0.9:1"), dst: ipEthBc, ifIndex: 2})
	if len(out.replies) != 0 {
		t.Fatal("second message of a datagram was answered")
	}
}

func TestBeaconsAndDiscoveryRepliesReachTracker(t *testing.T) {
	sink := &obsSink{}
	var responses []pva.GUID
	o := Options{GUID: ownGUID, Beacons: sink, OnSearchResponse: func(_ netip.AddrPort, m *pva.SearchResponse) {
		responses = append(responses, m.GUID)
	}, AddrList: []Destination{{Addr: netip.MustParseAddrPort("10.0.0.7:5076")}}}
	h, st := testHandler(t, o, &recSender{})
	// Capture block #2: server A's beacon, zero address.
	bcn := mustHex(t, `ca 02 c0 00 00 00 00 27 84 36 c7 fc 29 7c b7 3e 27 d1 e8 6b 00 00 00 02 00 00 00 00 00 00 00 00
		00 00 ff ff 00 00 00 00 13 d3 03 74 63 70 ff`)
	src := netip.MustParseAddrPort("10.0.0.7:47466")
	h.handle(&datagram{b: bcn, src: src, dst: ipEthBc, ifIndex: 2})
	pong := appendResponse(nil, guidB, pva.SearchSeqFind, pva.AnyIPv4, 5085, "tcp", nil)
	h.handle(&datagram{b: pong, src: netip.MustParseAddrPort("10.0.0.8:5076"), dst: ipEth, ifIndex: 2})
	own := appendResponse(nil, ownGUID, pva.SearchSeqFind, pva.AnyIPv4, 5075, "tcp", nil)
	h.handleClient(&datagram{b: own, src: netip.MustParseAddrPort("10.0.0.5:5076")})
	hit := appendResponse(nil, guidA, 1, pva.AnyIPv4, 5075, "tcp", []uint32{9})
	h.handleClient(&datagram{b: hit, src: netip.MustParseAddrPort("10.0.0.7:5076")})

	want := []beacon.Observation{
		{GUID: guidA, Endpoint: netip.MustParseAddrPort("10.0.0.7:5075"), Protocol: "tcp", Version: 2, ChangeCount: 2, From: src, Via: beacon.ViaBeacon},
		{GUID: guidB, Endpoint: netip.MustParseAddrPort("10.0.0.8:5085"), Protocol: "tcp", Version: 2, From: netip.MustParseAddrPort("10.0.0.8:5076"), Via: beacon.ViaDiscovery},
	}
	if got := sink.all(); !slices.Equal(got, want) {
		t.Fatalf("observations\n%+v\nwant\n%+v", got, want)
	}
	// Only positive replies are handed on; pongs went to the tracker and
	// our own answer is ours.
	if !slices.Equal(responses, []pva.GUID{guidA}) {
		t.Fatalf("responses %v", responses)
	}
	if st.beacons.Load() != 1 || st.searchReplies.Load() != 3 || st.discoveryPongs.Load() != 1 {
		t.Fatalf("stats %+v", metrics.Sprint(st))
	}
}

func TestMalformedAndOddDatagramsAreCounted(t *testing.T) {
	h, st := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry()}, &recSender{})
	good := searchMsg(0, netip.Addr{}, 1, []string{"tcp"}, "a")
	ctrl := slices.Clone(good)
	ctrl[2] |= pva.FlagControl
	seg := slices.Clone(good)
	seg[2] |= pva.FlagSegFirst
	echo := pva.AppendEcho(nil, 0, nil)
	for _, b := range [][]byte{nil, {0xCA}, good[:len(good)-1], ctrl, seg, echo} {
		h.handle(&datagram{b: b, src: netip.MustParseAddrPort("10.0.0.9:1"), dst: ipEthBc, ifIndex: 2})
	}
	h.handle(&datagram{b: good, src: netip.MustParseAddrPort("10.0.0.9:1"), dst: ipEthBc, ifIndex: 99})
	if st.dropMalformed.Load() != 3 || st.dropControl.Load() != 2 || st.dropCommand.Load() != 1 || st.dropUnknownInterface.Load() != 1 {
		t.Fatalf("stats %+v", metrics.Sprint(st))
	}
}

func TestBroadcastAddrList(t *testing.T) {
	got := BroadcastAddrList(testInterfaces(), 5076)
	want := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.255:5076"), netip.MustParseAddrPort("10.1.0.255:5076")}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
}

// A unicast to eth0's address arriving on eth1 (weak host model) is
// answered directly from eth1, not forwarded and then pinned to eth0.
func TestWeakHostArrivalAnsweredFromArrivalInterface(t *testing.T) {
	out := &recSender{}
	h, _ := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry()}, out)
	msg := searchMsg(pva.SearchUnicast, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1")
	h.handle(&datagram{b: msg, src: netip.MustParseAddrPort("10.1.0.9:5555"), dst: ipEth, ifIndex: 3})
	if len(out.forwards) != 0 || len(out.replies) != 1 || out.replies[0].from != ipEth2 || out.replies[0].ifIndex != 3 {
		t.Fatalf("forwards %d replies %+v", len(out.forwards), out.replies)
	}
	// The same datagram from a local process (arriving on lo) is forwarded
	// and answered from eth0's address through eth0, the interface owning
	// the address, as the forwarded copy was.
	out.reset()
	h.handle(&datagram{b: msg, src: netip.MustParseAddrPort("10.0.0.5:5555"), dst: ipEth, ifIndex: 1})
	if len(out.forwards) != 1 || len(out.replies) != 1 || out.replies[0].from != ipEth || out.replies[0].ifIndex != 2 {
		t.Fatalf("local: forwards %d replies %+v", len(out.forwards), out.replies)
	}
}

// A gateway host serving only its IOC leg (Interfaces eth0) is reached by
// a pvAccessCPP client on its other leg with EPICS_PVA_ADDR_LIST naming the
// served address: the unicast to eth0's address arrives on eth1 (weak
// host). A PVXS server bound to eth0's address answers it (the kernel hands
// the socket every unicast to its address), and so does pvans: from the
// address the client sent to, out of the interface the client is on. A
// broadcast on the unserved leg is still not answered.
func TestWeakHostArrivalAtServedAddressFromUnservedLeg(t *testing.T) {
	out := &recSender{}
	h, st := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry(), Interfaces: []netip.Addr{ipEth}}, out)
	msg := searchMsg(pva.SearchUnicast, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1")
	h.handle(&datagram{b: msg, src: netip.MustParseAddrPort("10.1.0.9:5555"), dst: ipEth, ifIndex: 3})
	if len(out.replies) != 1 || out.replies[0].from != ipEth || out.replies[0].ifIndex != 3 {
		t.Fatalf("replies %+v (not_our_interface %d), want one from %v out of eth1", out.replies, st.dropNotOurInterface.Load(), ipEth)
	}
	out.reset()
	bc := searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "cap:a:mbox1")
	h.handle(&datagram{b: bc, src: netip.MustParseAddrPort("10.1.0.9:5555"), dst: netip.MustParseAddr("10.1.0.255"), ifIndex: 3})
	if len(out.replies) != 0 {
		t.Fatalf("a broadcast on the unserved leg was answered: %+v", out.replies)
	}
}

// Hints (the trust rule): a beacon or search response is believed only when the
// server address it names is "any" (the sender's) or the sender's own, or
// the sender is a trusted relay; the server allow list must admit sender
// and named server; only "tcp"/"tls" count; beacons per sender are rate
// limited. Every refusal is counted by reason.
func TestHintRules(t *testing.T) {
	sink := &obsSink{}
	var responses []netip.AddrPort
	allowed := netip.MustParsePrefix("10.0.0.0/24")
	o := Options{GUID: ownGUID, Beacons: sink,
		OnSearchResponse: func(_ netip.AddrPort, m *pva.SearchResponse) {
			responses = append(responses, netip.AddrPortFrom(m.Addr.Addr(), m.Port))
		},
		ServerAllowed: allowed.Contains,
		TrustedRelays: []netip.Prefix{netip.MustParsePrefix("10.0.0.200/32")},
		// Searched: the attacker and the relay, not the IOC.
		AddrList:   []Destination{{Addr: netip.MustParseAddrPort("10.0.0.66:5076")}, {Addr: netip.MustParseAddrPort("10.0.0.200:5076")}},
		BeaconRate: 1, BeaconBurst: 3, Clock: clock.NewFake(time.Time{}),
	}
	h, st := testHandler(t, o, &recSender{})
	ioc, attacker, relay := netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("10.0.0.66"), netip.MustParseAddr("10.0.0.200")
	beaconFrom := func(from, named netip.Addr, proto string) {
		a := pva.AnyIPv4
		if named.IsValid() {
			a = pva.AddressFrom(named)
		}
		b := pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer, &pva.Beacon{GUID: guidA, Addr: a, Port: 5075, Protocol: proto})
		h.handle(&datagram{b: b, src: netip.AddrPortFrom(from, 5076), dst: ipEthBc, ifIndex: 2})
	}
	beaconFrom(ioc, netip.Addr{}, "tcp")                                      // any: the sender's address
	beaconFrom(ioc, ioc, "tcp")                                               // its own address (pvAccessCPP)
	beaconFrom(attacker, ioc, "tcp")                                          // a third address: dropped
	beaconFrom(relay, ioc, "tcp")                                             // a trusted relay may
	beaconFrom(ioc, netip.Addr{}, "zzz")                                      // protocol
	beaconFrom(netip.MustParseAddr("192.0.2.9"), netip.Addr{}, "tcp")         // sender not allowed
	beaconFrom(relay, netip.MustParseAddr("192.0.2.9"), "tcp")                // named server not allowed
	beaconFrom(ioc, netip.Addr{}, string(make([]byte, pva.MaxProtocolLen+1))) // over the bound
	for range 3 {
		// ioc's own burst (3) ends with the first of these: the relay's
		// sighting spent the relayed budget, not ioc's.
		beaconFrom(ioc, netip.Addr{}, "tcp")
	}
	iocEP := netip.AddrPortFrom(ioc, 5075)
	var got []netip.AddrPort
	for _, ob := range sink.all() {
		got = append(got, ob.Endpoint)
	}
	if !slices.Equal(got, []netip.AddrPort{iocEP, iocEP, iocEP, iocEP}) {
		t.Fatalf("observed %v", got)
	}
	hit := func(from netip.Addr, named pva.Address) {
		h.handleClient(&datagram{b: appendResponse(nil, guidB, 1, named, 5075, "tcp", []uint32{9}), src: netip.AddrPortFrom(from, 5076)})
	}
	hit(attacker, pva.AnyIPv4)          // names itself: a hint (matching is the ring's job)
	hit(attacker, pva.AddressFrom(ioc)) // names the IOC: dropped
	hit(relay, pva.AddressFrom(ioc))    // relay
	if !slices.Equal(responses, []netip.AddrPort{netip.AddrPortFrom(attacker, 5075), iocEP}) {
		t.Fatalf("responses %v", responses)
	}
	if st.hintAddress.Load() != 2 || st.hintProtocol.Load() != 2 || st.hintNotAllowed.Load() != 2 || st.hintRate.Load() != 2 {
		t.Fatalf("hint drops %+v", metrics.Sprint(st))
	}
}

// A search reply counts when it comes from a host a search went to: a
// unicast destination itself, or any host on the network of a directed
// broadcast destination.
func TestReplyFromSearchedHostOnly(t *testing.T) {
	var from []netip.Addr
	o := Options{GUID: ownGUID, AddrList: []Destination{{Addr: netip.AddrPortFrom(ipEthBc, 5076)}},
		OnSearchResponse: func(src netip.AddrPort, _ *pva.SearchResponse) { from = append(from, src.Addr()) }}
	h, st := testHandler(t, o, &recSender{})
	for _, a := range []string{"10.0.0.7", "10.1.0.7", "10.0.0.200"} {
		h.handleClient(&datagram{b: appendResponse(nil, guidA, 1, pva.AnyIPv4, 5075, "tcp", []uint32{9}),
			src: netip.AddrPortFrom(netip.MustParseAddr(a), 5076)})
	}
	want := []netip.Addr{netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("10.0.0.200")}
	if !slices.Equal(from, want) || st.hintUnsolicited.Load() != 1 {
		t.Fatalf("delivered from %v (unsolicited %d), want %v", from, st.hintUnsolicited.Load(), want)
	}
}

// A server pvans asked directly (Server.Expect) may answer over UDP for a
// while, for itself only (its host, the port asked); after that its
// replies are unsolicited again.
func TestExpectedHostAnswers(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	var n int
	s := New(Options{GUID: ownGUID, Clock: clk, OnSearchResponse: func(netip.AddrPort, *pva.SearchResponse) { n++ }})
	asked := netip.MustParseAddrPort("10.7.7.7:5076")
	reply := func(port uint16) {
		s.fam[ip4].ch.handleClient(&datagram{b: appendResponse(nil, guidA, 1, pva.AnyIPv4, port, "tcp", []uint32{9}), src: asked})
	}
	reply(5075)
	s.Expect(netip.AddrPortFrom(asked.Addr(), 5075), 2*time.Second)
	reply(5075)
	reply(5099) // another port of that host: not the server asked
	clk.Advance(3 * time.Second)
	reply(5075)
	if n != 1 || s.st.hintUnsolicited.Load() != 3 {
		t.Fatalf("%d delivered, %d unsolicited; want 1 and 3", n, s.st.hintUnsolicited.Load())
	}
}

// The IPv6 client socket judges search replies as the IPv4 one does: by
// the destinations now (SetDestinations after a reload or a DNS change)
// and the servers asked directly, not by the start-up address list.
func TestIPv6ClientRepliesFollowDestinations(t *testing.T) {
	var n int
	first, later := netip.MustParseAddrPort("[fd00::7]:5076"), netip.MustParseAddrPort("[fd00::8]:5076")
	s := New(Options{GUID: ownGUID, AddrList: []Destination{{Addr: first}},
		OnSearchResponse: func(netip.AddrPort, *pva.SearchResponse) { n++ }})
	reply := func(src netip.AddrPort) {
		s.fam[ip6].ch.handleClient(&datagram{b: appendResponse(nil, guidA, 1, pva.AnyIPv4, 5075, "tcp", []uint32{9}), src: src})
	}
	s.SetDestinations([]Destination{{Addr: later}}, nil)
	reply(later)
	reply(first)
	asked := netip.MustParseAddrPort("[fd00::9]:5076")
	s.Expect(netip.AddrPortFrom(asked.Addr(), 5075), time.Minute)
	reply(asked)
	if n != 2 || s.st.hintUnsolicited.Load() != 1 {
		t.Fatalf("%d delivered, %d unsolicited; want 2 and 1", n, s.st.hintUnsolicited.Load())
	}
}

// Reply destinations: IPv6 unicast is fine now that the participant has
// IPv6 sockets; IPv4-mapped, unspecified and multicast IPv6 are not.
func TestReplyableIPv6(t *testing.T) {
	h, _ := testHandler(t, Options{}, &recSender{})
	cases := map[string]bool{
		"2001:db8::5": true, "fd00:18:2::2": true, "10.0.0.9": true,
		"::": false, "::ffff:10.0.0.9": false, "ff02::1": false, "0.0.0.0": false, "10.0.0.255": false,
	}
	for a, want := range cases {
		if got := h.replyable(netip.MustParseAddr(a), 5076); got != want {
			t.Errorf("replyable(%s) = %v, want %v", a, got, want)
		}
	}
	if h.replyable(netip.MustParseAddr("2001:db8::5"), 0) {
		t.Errorf("port 0 replyable")
	}
}

// A trusted relay speaks for other hosts, not for pvans's own: a relay's
// datagram (whose source can be forged by anyone who can send as the
// relay) naming a loopback, multicast, broadcast or unspecified address is
// dropped, or it would make pvans probe its own loopback services and
// publish a loopback-only server to remote clients.
func TestRelayMayNotNameLoopback(t *testing.T) {
	sink := &obsSink{}
	o := Options{GUID: ownGUID, Beacons: sink,
		TrustedRelays: []netip.Prefix{netip.MustParsePrefix("10.0.0.200/32")},
		Clock:         clock.NewFake(time.Time{}),
	}
	h, st := testHandler(t, o, &recSender{})
	relay := netip.MustParseAddr("10.0.0.200")
	named := []string{"127.0.0.1", "127.3.4.5", "::1", "224.0.0.128", "255.255.255.255", "::ffff:127.0.0.1", "10.0.0.7"}
	for _, n := range named {
		b := pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer, &pva.Beacon{GUID: guidA, Addr: pva.AddressFrom(netip.MustParseAddr(n)), Port: 5075, Protocol: "tcp"})
		h.handle(&datagram{b: b, src: netip.AddrPortFrom(relay, 5076), dst: ipEthBc, ifIndex: 2})
	}
	var got []netip.AddrPort
	for _, ob := range sink.all() {
		got = append(got, ob.Endpoint)
	}
	if want := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.7:5075")}; !slices.Equal(got, want) {
		t.Fatalf("relay hints taken %v, want %v", got, want)
	}
	if n := st.hintAddress.Load(); n != uint64(len(named)-1) {
		t.Fatalf("address_mismatch %d, want %d", n, len(named)-1)
	}
}

// A trusted relay speaking for a subnet of IOCs spends each IOC's relayed
// beacon budget, not its own: the relay's 30 beacons for 10 IOCs are all
// taken with a burst of 3 per sender, its 31st for one of them is refused,
// and that IOC's own beacon after them is still taken: a datagram forged
// from the relay's address cannot spend an IOC's own budget.
func TestRelayedBeaconsSpendTheNamedServersBudget(t *testing.T) {
	sink := &obsSink{}
	o := Options{GUID: ownGUID, Beacons: sink,
		TrustedRelays: []netip.Prefix{netip.MustParsePrefix("10.0.0.200/32")},
		BeaconRate:    1, BeaconBurst: 3, Clock: clock.NewFake(time.Time{}),
	}
	h, st := testHandler(t, o, &recSender{})
	relay := netip.MustParseAddr("10.0.0.200")
	for round := 0; round < 3; round++ {
		for i := 1; i <= 10; i++ {
			ioc := netip.AddrFrom4([4]byte{10, 0, 0, byte(10 + i)}) // not this host's 10.0.0.5
			b := pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer, &pva.Beacon{GUID: guidA, Addr: pva.AddressFrom(ioc), Port: 5075, Protocol: "tcp"})
			h.handle(&datagram{b: b, src: netip.AddrPortFrom(relay, 5076), dst: ipEthBc, ifIndex: 2})
		}
	}
	ioc := netip.MustParseAddr("10.0.0.11")
	b := pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer, &pva.Beacon{GUID: guidA, Addr: pva.AddressFrom(ioc), Port: 5075, Protocol: "tcp"})
	h.handle(&datagram{b: b, src: netip.AddrPortFrom(relay, 5076), dst: ipEthBc, ifIndex: 2})
	if n := len(sink.all()); n != 30 || st.hintRate.Load() != 1 {
		t.Fatalf("%d sightings taken, %d rate limited; want 30 and the relay's 31st", n, st.hintRate.Load())
	}
	b = pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer, &pva.Beacon{GUID: guidA, Addr: pva.AnyIPv4, Port: 5075, Protocol: "tcp"})
	h.handle(&datagram{b: b, src: netip.AddrPortFrom(ioc, 5076), dst: ipEthBc, ifIndex: 2})
	if n := len(sink.all()); n != 31 || st.hintRate.Load() != 1 {
		t.Fatalf("the IOC's own beacon after the relay's: %d sightings taken, %d rate limited; want 31 and 1", n, st.hintRate.Load())
	}
}

// The relay profile (Policy.Silent) answers no search, not even a
// discovery ping, which would name a TCP port where it has no name server;
// a unicast search is still forwarded to the host's other servers.
func TestSilentAnswersNothingButForwards(t *testing.T) {
	out := &recSender{}
	o := Options{AnswerNames: true, Resolver: captureRegistry()}
	h, _ := testHandler(t, o, out)
	o.setDefaults()
	pol := o.policy()
	pol.Silent = true
	h.pol.Store(newPolicy(pol, nil, o.Clock, nil))
	ping := searchMsg(pva.SearchMustReply|pva.SearchUnicast, netip.Addr{}, 40000, nil)
	h.handle(&datagram{b: ping, src: netip.MustParseAddrPort("10.0.0.9:5555"), dst: ipEth, ifIndex: 2})
	miss := searchMsg(pva.SearchMustReply|pva.SearchUnicast, netip.Addr{}, 40000, []string{"tcp"}, "nobody:here")
	h.handle(&datagram{b: miss, src: netip.MustParseAddrPort("10.0.0.9:5555"), dst: ipEth, ifIndex: 2})
	if len(out.replies) != 0 || len(out.forwards) != 2 {
		t.Fatalf("replies %+v, forwards %d; want none and 2", out.replies, len(out.forwards))
	}
}

// OnDiscoveryPing hears every discovery ping a relay (Silent) gets, with
// the datagram's source (not the reply address a sender may write), and
// no search that names channels: a relay re-announces to a relay.to
// destination that pings it (issue 41).
func TestOnDiscoveryPing(t *testing.T) {
	out := &recSender{}
	var pinged []netip.AddrPort
	o := Options{AnswerNames: true, Resolver: captureRegistry(), OnDiscoveryPing: func(from netip.AddrPort) { pinged = append(pinged, from) }}
	h, _ := testHandler(t, o, out)
	o.setDefaults()
	pol := o.policy()
	pol.Silent = true
	h.pol.Store(newPolicy(pol, nil, o.Clock, nil))
	src := netip.MustParseAddrPort("10.0.0.9:5555")
	ping := searchMsg(pva.SearchMustReply|pva.SearchUnicast, netip.MustParseAddr("10.0.0.77"), 40000, nil)
	h.handle(&datagram{b: ping, src: src, dst: ipEth, ifIndex: 2})
	miss := searchMsg(pva.SearchMustReply|pva.SearchUnicast, netip.Addr{}, 40000, []string{"tcp"}, "nobody:here")
	h.handle(&datagram{b: miss, src: src, dst: ipEth, ifIndex: 2})
	if len(pinged) != 1 || pinged[0] != src {
		t.Fatalf("told of pings from %v, want one from %v", pinged, src)
	}
}
