package pva

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"github.com/pvans-project/pvans/internal/testutil"
)

// The capture of Phoebus core-pva (testdata/captures/java.txt, recorded by
// scripts/record-java-captures.sh; its blocks are listed in the README):
// the Java client's searches over UDP and over TCP, and the Java server's
// replies, including to CIDs with the top bit set. CI has no Java, so these
// bytes are what pvans is held to for Phoebus peers.

const (
	javaGUID      = "79ca22cab51fb75343107a8e" // the Java server (ServerDemo)
	javaUDPClient = "127.0.0.1:42458"          // the Java client's UDP search socket
	javaSeqTCP    = 0x6C6F6F6B                 // the Java client's fixed TCP searchSequenceID
)

func javaMessages(tb testing.TB) []capMsg {
	tb.Helper()
	return splitMessages(tb, testutil.CaptureOf(tb, testutil.JavaCaptureFile))
}

// javaOnly returns the single message of block n of the Java capture.
func javaOnly(tb testing.TB, n int) capMsg {
	tb.Helper()
	ms := messagesOfBlock(tb, javaMessages(tb), n)
	if len(ms) != 1 {
		tb.Fatalf("java block #%d holds %d messages, want 1", n, len(ms))
	}
	return ms[0]
}

func javaSearch(tb testing.TB, n int) (capMsg, *Search) {
	tb.Helper()
	m := javaOnly(tb, n)
	var s Search
	if m.H.Command != CmdSearch {
		tb.Fatalf("java block #%d is %v, want CMD_SEARCH", n, m.H.Command)
	}
	if err := s.Decode(m.Payload, m.H.BigEndian()); err != nil {
		tb.Fatalf("java block #%d: %v", n, err)
	}
	return m, &s
}

func javaResponse(tb testing.TB, n int) (capMsg, *SearchResponse) {
	tb.Helper()
	m := javaOnly(tb, n)
	var r SearchResponse
	if m.H.Command != CmdSearchResponse || !m.H.FromServer() {
		tb.Fatalf("java block #%d is %v (flags %#x), want a server's CMD_SEARCH_RESPONSE", n, m.H.Command, m.H.Flags)
	}
	if err := r.Decode(m.Payload, m.H.BigEndian()); err != nil {
		tb.Fatalf("java block #%d: %v", n, err)
	}
	return m, &r
}

// The blocks the recording script's crafted client sent (version 2), not
// core-pva.
var javaCrafted = map[int]bool{58: true, 61: true, 65: true, 67: true, 70: true}

// The Java client's GET requests send the pvRequest in the 0xFD type-cache
// form; our encoder writes plain descriptors, so these are compared by
// content.
var javaCacheForm = map[int]bool{20: true, 25: true, 31: true}

// Every message of the Java capture decodes with the project's codec and
// re-encodes to the same bytes but for the header's version: core-pva
// writes protocol version 3, pvans 2. Only CMD_ACL_CHANGE (which pvans
// never reads) has no decoder.
func TestJavaCaptureEveryMessageDecodesAndReencodes(t *testing.T) {
	s := newCapState()
	seen := map[Command]int{}
	for _, m := range javaMessages(t) {
		if want := map[bool]uint8{false: 3, true: 2}[javaCrafted[m.Block]]; m.H.Version != want {
			t.Errorf("block #%d: version %d, want %d", m.Block, m.H.Version, want)
		}
		if !m.H.Control() {
			seen[m.H.Command]++
		}
		if m.H.Command == CmdACLChange && !m.H.Control() {
			continue
		}
		v, re, err := decodeCaptured(s, m)
		if err != nil {
			t.Errorf("block #%d %v: %v", m.Block, m.H.Command, err)
			continue
		}
		if javaCacheForm[m.Block] {
			m2 := m
			m2.Raw, m2.Payload, m2.Conn = re, re[HeaderSize:], "reencoded"+m.Conn
			v2, re2, err := decodeCaptured(s, m2)
			if err != nil || !bytes.Equal(re2, re) || !reflect.DeepEqual(v, v2) {
				t.Errorf("block #%d: plain re-encoding differs: %v", m.Block, err)
			}
			continue
		}
		want := bytes.Clone(m.Raw)
		want[1] = Version
		if !bytes.Equal(re, want) {
			t.Errorf("block #%d %v re-encoded\n got %x\nwant %x", m.Block, m.H.Command, re, want)
		}
	}
	for _, c := range []Command{CmdSearch, CmdSearchResponse, CmdConnectionValidation, CmdConnectionValidated,
		CmdCreateChannel, CmdGet} {
		if seen[c] == 0 {
			t.Errorf("capture has no %v", c)
		}
	}
	// The Java server sends no beacons: none in the 80 s of the capture
	// (a PVXS or pvAccessCPP server beacons within its first 15 s).
	if seen[CmdBeacon] != 0 {
		t.Errorf("%d beacons in the Java capture", seen[CmdBeacon])
	}
}

// The Java client's UDP searches (blocks #1-#3, PVAClientMain get demo
// demo2 demo3): big endian, flags Unicast|0x02 (FLAG_REPLY_SRC_PORT,
// protocol version 3), a new searchSequenceID per datagram, reply address
// ::ffff:0.0.0.0 and the socket's own port, CIDs numbered from 2. Each
// channel created starts a search round at once, so the three names leave
// in three datagrams within 0.1 s, the same CID for the same name each time.
func TestJavaCaptureClientSearchUDP(t *testing.T) {
	for _, tc := range []struct {
		block int
		seq   uint32
		names []string
	}{
		{1, 1, []string{"2=demo", "3=demo2", "4=demo3"}},
		{2, 3, []string{"2=demo", "4=demo3"}},
		{3, 4, []string{"3=demo2"}},
	} {
		m, s := javaSearch(t, tc.block)
		if m.TCP || !m.H.BigEndian() || m.H.FromServer() || m.Conn != javaUDPClient+">127.0.0.1:5076" {
			t.Errorf("#%d: %s header %+v", tc.block, m.Conn, m.H)
		}
		if s.Seq != tc.seq || s.Flags != SearchUnicast|0x02 || !s.Unicast() || s.MustReply() ||
			s.ReplyAddr != AnyIPv4 || s.ReplyPort != 42458 || len(s.Protocols) != 1 || !s.HasProtocol("tcp") {
			t.Errorf("#%d: %+v", tc.block, s)
		}
		if got := names(s); !slices.Equal(got, tc.names) {
			t.Errorf("#%d names %v, want %v", tc.block, got, tc.names)
		}
		for _, n := range s.Names {
			if int32(n.CID) < 0 {
				t.Errorf("#%d: negative CID %#x", tc.block, n.CID)
			}
		}
	}
}

// The Java client's searches over TCP to a name server (blocks #42-#47,
// #54, EPICS_PVA_NAME_SERVERS=127.0.0.1:5075): little endian on this
// little-endian machine (the UDP ones are big endian), the fixed
// searchSequenceID 0x6C6F6F6B ("look"), reply port zero; the same burst of
// repeated names, and the same CIDs as its UDP searches would carry. A
// fingerprint of the UDP copy and of the TCP copy of one search cannot
// match: byte order and sequence differ.
func TestJavaCaptureClientSearchTCP(t *testing.T) {
	want := map[int][]string{
		42: {"2=demo"},
		43: {"3=demo2", "4=demo3"},
		44: {"2=demo"},
		45: {"3=demo2"},
		46: {"4=demo3"},
		47: {"4=demo3"},
		54: {"2=demo", "3=demo2", "4=demo3"},
	}
	for _, b := range []int{42, 43, 44, 45, 46, 47, 54} {
		m, s := javaSearch(t, b)
		if !m.TCP || m.H.BigEndian() || m.H.FromServer() {
			t.Errorf("#%d: header %+v", b, m.H)
		}
		if s.Seq != javaSeqTCP || s.Flags != SearchUnicast|0x02 || s.ReplyAddr != AnyIPv4 || s.ReplyPort != 0 ||
			!s.HasProtocol("tcp") {
			t.Errorf("#%d: %+v", b, s)
		}
		if got := names(s); !slices.Equal(got, want[b]) {
			t.Errorf("#%d names %v, want %v", b, got, want[b])
		}
	}
	// what the sequence looks like on the wire: "kool"
	if m := javaOnly(t, 42); !bytes.Equal(m.Payload[:4], []byte("kool")) {
		t.Errorf("#42 sequence bytes %q", m.Payload[:4])
	}
}

// The Java server's answers (UDP #4-#9, TCP #48-#53, #55-#57): big endian
// over UDP, from its UDP port 5076, little endian over TCP; its GUID; the
// address ::ffff:0.0.0.0; its TCP port 5075 over UDP but port ZERO over
// TCP (core-pva means "this connection"; a core-pva client takes it
// literally and connects to port 0, so a Java client cannot use a Java
// server as its name server); the client's sequence echoed; one found CID
// per reply, one reply per name searched, repeats included.
func TestJavaCaptureServerSearchResponses(t *testing.T) {
	guid := mustGUID(t, javaGUID)
	for _, tc := range []struct {
		block int
		seq   uint32
		cid   uint32
	}{
		{4, 1, 2}, {5, 1, 3}, {6, 1, 4}, {7, 3, 2}, {8, 3, 4}, {9, 4, 3},
		{48, javaSeqTCP, 2}, {49, javaSeqTCP, 3}, {50, javaSeqTCP, 4}, {51, javaSeqTCP, 2}, {52, javaSeqTCP, 3},
		{53, javaSeqTCP, 4}, {55, javaSeqTCP, 2}, {56, javaSeqTCP, 3}, {57, javaSeqTCP, 4},
	} {
		m, r := javaResponse(t, tc.block)
		port := uint16(5075)
		if m.TCP {
			port = 0
		}
		if m.H.BigEndian() == m.TCP || (!m.TCP && m.Conn != "127.0.0.1:5076>"+javaUDPClient) {
			t.Errorf("#%d: %s header %+v", tc.block, m.Conn, m.H)
		}
		if r.GUID != guid || r.Seq != tc.seq || r.Addr != AnyIPv4 || r.Port != port || !r.Found ||
			string(r.Protocol) != "tcp" || !slices.Equal(r.CIDs, []uint32{tc.cid}) {
			t.Errorf("#%d: %+v", tc.block, r)
		}
	}
}

// A CID with the top bit set is negative as core-pva's Java int, and the
// Java server takes the search as a "list servers" ping
// (PVAServer.handleSearchRequest, cid < 0): it replies found=0 with no
// CID, the name is never claimed, whether the name is served or not, in
// either byte order, over UDP or TCP. Over UDP the ping's reply does not
// even echo the sequence (0). Names with positive CIDs in the same message
// are answered as usual.
func TestJavaCaptureNegativeCIDIsAPing(t *testing.T) {
	guid := mustGUID(t, javaGUID)
	for _, tc := range []struct {
		search   int
		be       bool
		names    []string
		ping     int    // the reply block with no CID
		pingSeq  uint32 // its sequence
		port     uint16
		found    int // the reply block claiming the positive CID, or 0
		foundCID uint32
	}{
		{58, true, []string{"80000001=demo", "2=demo2"}, 59, 0, 5075, 60, 2},
		{61, false, []string{"fffffff0=demo"}, 62, 0, 5075, 0, 0},
		{67, false, []string{"80000003=demo", "4=demo3"}, 68, 0x20, 0, 69, 4}, // over TCP
	} {
		m, s := javaSearch(t, tc.search)
		if m.H.BigEndian() != tc.be || !slices.Equal(names(s), tc.names) || int32(s.Names[0].CID) >= 0 {
			t.Fatalf("#%d: %+v %v", tc.search, m.H, names(s))
		}
		pm, p := javaResponse(t, tc.ping)
		if p.Found || len(p.CIDs) != 0 || p.GUID != guid || p.Seq != tc.pingSeq || p.Port != tc.port ||
			!pm.H.BigEndian() != pm.TCP {
			t.Errorf("ping reply #%d: %+v", tc.ping, p)
		}
		if tc.found != 0 {
			_, r := javaResponse(t, tc.found)
			if !r.Found || !slices.Equal(r.CIDs, []uint32{tc.foundCID}) || r.Seq != s.Seq {
				t.Errorf("reply #%d: %+v", tc.found, r)
			}
		}
	}
	// No reply anywhere in the capture claims a negative CID.
	for _, m := range javaMessages(t) {
		if m.H.Command != CmdSearchResponse {
			continue
		}
		var r SearchResponse
		if err := r.Decode(m.Payload, m.H.BigEndian()); err != nil {
			t.Fatal(err)
		}
		for _, c := range r.CIDs {
			if int32(c) < 0 {
				t.Errorf("#%d claims negative CID %#x", m.Block, c)
			}
		}
	}
}

// The Java server has no `server` PV: a CREATE_CHANNEL for it (#70, CID 5,
// after a validated connection #63-#66) gets no reply at all (core-pva
// logs "Channel create request for unknown PV 'server'" at WARNING); the
// connection stays silent until the client closes it 2 s later.
func TestJavaCaptureServerPVUnanswered(t *testing.T) {
	m := javaOnly(t, 70)
	var c CreateChannel
	if m.H.Command != CmdCreateChannel || m.H.FromServer() || c.Decode(m.Payload, m.H.BigEndian()) != nil {
		t.Fatalf("#70: %+v", m.H)
	}
	if len(c.Channels) != 1 || c.Channels[0].CID != 5 || c.Channels[0].Name != "server" {
		t.Fatalf("#70: %+v", c)
	}
	back := "127.0.0.1:5075>" + m.Conn[:len(m.Conn)-len(">127.0.0.1:5075")]
	for _, x := range javaMessages(t) {
		if x.Block > 70 && x.Conn == back {
			t.Errorf("#%d: the server answered %v", x.Block, x.H.Command)
		}
	}
	// the connection was validated: #66 is CONNECTION_VALIDATED, status OK
	v := javaOnly(t, 66)
	if v.H.Command != CmdConnectionValidated || v.Conn != back {
		t.Fatalf("#66: %s %+v", v.Conn, v.H)
	}
}

// The Java server's validation request (#11): buffer size 0x4000, registry
// 0x7FFF, methods anonymous and ca, little endian after SET_BYTE_ORDER (#10).
func TestJavaCaptureServerValidation(t *testing.T) {
	if m := javaOnly(t, 10); !m.H.Control() || m.H.Command != CtrlSetByteOrder || m.H.BigEndian() {
		t.Fatalf("#10: %+v", m.H)
	}
	m := javaOnly(t, 11)
	var v ServerValidation
	if m.H.Command != CmdConnectionValidation || v.Decode(m.Payload, m.H.BigEndian()) != nil {
		t.Fatalf("#11: %+v", m.H)
	}
	if v.BufferSize != 0x4000 || v.RegistrySize != 0x7FFF || len(v.AuthMethods) != 2 ||
		v.AuthMethods[0] != "anonymous" || v.AuthMethods[1] != "ca" {
		t.Errorf("#11: %+v", v)
	}
}
