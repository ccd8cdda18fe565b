package pva

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"
)

// capState is what a connection keeps between messages: one TypeCache per
// direction and the GET types announced by INIT replies.
type capState struct {
	caches   map[string]*TypeCache
	getTypes map[string]*FieldDesc
	getVals  map[string]*GetReply
}

func newCapState() *capState {
	return &capState{caches: map[string]*TypeCache{}, getTypes: map[string]*FieldDesc{}, getVals: map[string]*GetReply{}}
}

func (s *capState) cache(conn string) *TypeCache {
	if s.caches[conn] == nil {
		s.caches[conn] = &TypeCache{}
	}
	return s.caches[conn]
}

// decodeCaptured decodes one message with the decoder its command and
// direction call for, and re-encodes the result with the same header
// flags.
func decodeCaptured(s *capState, m capMsg) (any, []byte, error) {
	return decodeCapturedAs(s, m, m.H.Flags)
}

// decodeCapturedAs re-encodes with header flags fl (e.g. the other byte
// order).
func decodeCapturedAs(s *capState, m capMsg, fl uint8) (any, []byte, error) {
	be, p := m.H.BigEndian(), m.Payload
	tc := s.cache(m.Conn)
	if m.H.Control() {
		if m.H.Command != CtrlSetByteOrder || m.H.Segment() != 0 {
			return nil, nil, fmt.Errorf("unexpected control message %+v", m.H)
		}
		return m.H, AppendSetByteOrder(nil, fl&^FlagControl), nil
	}
	switch m.H.Command {
	case CmdBeacon:
		var v Beacon
		err := v.Decode(p, be)
		return &v, AppendBeacon(nil, fl, &v), err
	case CmdSearch:
		var v Search
		err := v.Decode(p, be)
		return &v, AppendSearch(nil, fl, &v), err
	case CmdSearchResponse:
		var v SearchResponse
		err := v.Decode(p, be)
		return &v, AppendSearchResponse(nil, fl, &v), err
	case CmdOriginTag:
		a, err := DecodeOriginTag(p, be)
		return a, AppendOriginTag(nil, fl, a), err
	case CmdConnectionValidation:
		if m.H.FromServer() {
			var v ServerValidation
			err := v.Decode(p, be)
			return &v, AppendServerValidation(nil, fl, &v), err
		}
		var v ClientValidation
		if err := v.Decode(p, be); err != nil {
			return nil, nil, err
		}
		auth, err := v.Auth(be, tc)
		if err != nil {
			return nil, nil, err
		}
		w := Writer{BE: fl&FlagBigEndian != 0}
		AppendTypeValue(&w, auth)
		v2 := v
		v2.AuthPayload = w.B
		return auth, AppendClientValidation(nil, fl, &v2), nil
	case CmdConnectionValidated:
		st, err := DecodeConnectionValidated(p, be)
		return st, AppendConnectionValidated(nil, fl, st), err
	case CmdEcho:
		return p, AppendEcho(nil, fl, p), nil
	case CmdCreateChannel:
		if m.H.FromServer() {
			var v CreateChannelReply
			err := v.Decode(p, be)
			return &v, AppendCreateChannelReply(nil, fl, &v), err
		}
		var v CreateChannel
		err := v.Decode(p, be)
		return &v, AppendCreateChannel(nil, fl, &v), err
	case CmdDestroyChannel:
		var v DestroyChannel
		err := v.Decode(p, be)
		return &v, AppendDestroyChannel(nil, fl, &v), err
	case CmdDestroyRequest, CmdCancelRequest:
		var v RequestRef
		err := v.Decode(p, be)
		return &v, AppendRequestRef(nil, fl, m.H.Command, &v), err
	case CmdMessage:
		var v Message
		err := v.Decode(p, be)
		return &v, AppendMessageMsg(nil, fl, &v), err
	case CmdRPC:
		if m.H.FromServer() {
			var v RPCReply
			err := v.Decode(p, be, tc)
			return &v, AppendRPCReply(nil, fl, &v), err
		}
		var v RPCRequest
		err := v.Decode(p, be, tc)
		return &v, AppendRPCRequest(nil, fl, &v), err
	case CmdGet:
		if !m.H.FromServer() {
			var v GetRequest
			err := v.Decode(p, be, tc)
			return &v, AppendGetRequest(nil, fl, &v), err
		}
		if len(p) < 4 {
			return nil, nil, errors.New("short GET reply")
		}
		key := m.Conn + fmt.Sprint(p[:4])
		v := s.getVals[key]
		if v == nil {
			v = &GetReply{}
			s.getVals[key] = v
		}
		err := v.Decode(p, be, tc, s.getTypes[key])
		if err == nil && v.IsInit() {
			s.getTypes[key] = v.Type
		}
		return v, AppendGetReply(nil, fl, v), err
	}
	return nil, nil, fmt.Errorf("no decoder for %v", m.H.Command)
}

// Blocks where pvAccessCPP used the 0xFD/0xFE type cache: our encoder
// always writes plain descriptors, so these are compared semantically.
var cacheFormBlocks = map[int]bool{54: true, 58: true, 60: true, 74: true, 78: true, 80: true, 81: true, 90: true, 101: true}

func TestCaptureEveryMessageDecodesAndReencodes(t *testing.T) {
	s := newCapState()
	seen := map[Command]int{}
	exact := 0
	for _, m := range captureMessages(t) {
		v, re, err := decodeCaptured(s, m)
		if err != nil {
			t.Errorf("block #%d %v: %v", m.Block, m.H.Command, err)
			continue
		}
		if !m.H.Control() {
			seen[m.H.Command]++
		}
		if !cacheFormBlocks[m.Block] {
			if !bytes.Equal(re, m.Raw) {
				t.Errorf("block #%d %v re-encoded\n got %x\nwant %x", m.Block, m.H.Command, re, m.Raw)
			}
			exact++
			continue
		}
		if bytes.Equal(re, m.Raw) {
			t.Errorf("block #%d: expected a cache form in the capture", m.Block)
		}
		// decode our plain re-encoding with a fresh cache: same content
		m2 := m
		m2.Raw = re
		m2.Payload = re[HeaderSize:]
		m2.Conn = "reencoded" + m.Conn
		v2, re2, err := decodeCaptured(s, m2)
		if err != nil || !bytes.Equal(re2, re) {
			t.Errorf("block #%d: plain re-encoding does not round-trip: %v", m.Block, err)
		}
		if !reflect.DeepEqual(v, v2) {
			t.Errorf("block #%d: decoded %+v, from re-encoding %+v", m.Block, v, v2)
		}
	}
	for _, c := range []Command{CmdBeacon, CmdSearch, CmdSearchResponse, CmdOriginTag, CmdConnectionValidation,
		CmdConnectionValidated, CmdCreateChannel, CmdRPC, CmdGet, CmdDestroyRequest} {
		if seen[c] == 0 {
			t.Errorf("capture has no %v", c)
		}
	}
	if exact < 100 {
		t.Errorf("only %d messages compared byte for byte", exact)
	}
}

func mustGUID(t *testing.T, s string) GUID {
	t.Helper()
	g, err := ParseGUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

var lo = AddressFrom(netip.MustParseAddr("127.0.0.1"))

func TestCaptureBeacons(t *testing.T) {
	for _, tc := range []struct {
		block  int
		guid   string
		be     bool
		change uint16
		port   uint16
		addr   Address
	}{
		{1, "89e4cb73345dc98f69f612ab", true, 1, 5085, AnyIPv4}, // PVXS server B
		{2, "8436c7fc297cb73e27d1e86b", true, 2, 5075, AnyIPv4}, // PVXS server A
		// pvAccessCPP, little endian, bound to 127.0.0.1 and saying so
		{72, "de83116b0000000069750922", false, 0, 5075, lo},
	} {
		m := onlyMessage(t, tc.block)
		var b Beacon
		if err := b.Decode(m.Payload, m.H.BigEndian()); err != nil {
			t.Fatal(err)
		}
		if m.H.BigEndian() != tc.be || !m.H.FromServer() || b.GUID != mustGUID(t, tc.guid) ||
			b.ChangeCount != tc.change || b.Port != tc.port || b.Protocol != "tcp" || b.Addr != tc.addr ||
			!bytes.Equal(b.Status, []byte{0xFF}) {
			t.Errorf("block #%d: %+v", tc.block, b)
		}
	}
	// what pvans would send for server A is block #2
	m := onlyMessage(t, 2)
	got := AppendBeacon(nil, FlagBigEndian|FlagServer, &Beacon{GUID: mustGUID(t, "8436c7fc297cb73e27d1e86b"),
		ChangeCount: 2, Addr: AnyIPv4, Port: 5075, Protocol: "tcp"})
	if !bytes.Equal(got, m.Raw) {
		t.Errorf("beacon\n got %x\nwant %x", got, m.Raw)
	}
}

func names(s *Search) []string {
	var out []string
	for _, n := range s.Names {
		out = append(out, fmt.Sprintf("%x=%s", n.CID, n.Name))
	}
	return out
}

func TestCaptureSearchAndForward(t *testing.T) {
	m3 := onlyMessage(t, 3)
	var s Search
	if err := s.Decode(m3.Payload, m3.H.BigEndian()); err != nil {
		t.Fatal(err)
	}
	if s.Seq != SearchSeqFind || !s.Unicast() || s.MustReply() || s.ReplyAddr != (Address{}) ||
		s.ReplyPort != 43027 || !s.HasProtocol("tcp") || len(s.Protocols) != 1 {
		t.Fatalf("#3: %+v", s)
	}
	if got, want := names(&s), []string{"12345678=cap:b:mbox3", "12345679=cap:a:mbox1"}; !slices.Equal(got, want) {
		t.Fatalf("#3 names %v", got)
	}
	// the client side: what a PVXS client (and pvans searching through) sends
	sent := AppendSearch(nil, FlagBigEndian, &Search{Seq: SearchSeqFind, Flags: SearchUnicast, ReplyPort: 43027,
		Protocols: [][]byte{[]byte("tcp")}, Names: []SearchName{{CID: 0x12345678, Name: []byte("cap:b:mbox3")},
			{CID: 0x12345679, Name: []byte("cap:a:mbox1")}}})
	if !bytes.Equal(sent, m3.Raw) {
		t.Fatalf("search\n got %x\nwant %x", sent, m3.Raw)
	}
	// #4 is #3 forwarded: origin tag 127.0.0.1, Unicast cleared, reply address 127.0.0.1
	b4 := block(t, 4)
	fwd, err := AppendForward(nil, lo, m3.Raw, lo)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fwd, b4.Data) {
		t.Fatalf("forward\n got %x\nwant %x", fwd, b4.Data)
	}
	ms := blockMessages(t, 4)
	if len(ms) != 2 || ms[0].H.Command != CmdOriginTag || ms[1].H.Command != CmdSearch {
		t.Fatalf("#4 split %+v", ms)
	}
	if a, err := DecodeOriginTag(ms[0].Payload, true); err != nil || a != lo || a.String() != "127.0.0.1" {
		t.Fatalf("#4 origin %v %v", a, err)
	}
	var f Search
	if err := f.Decode(ms[1].Payload, true); err != nil || f.Unicast() || f.ReplyAddr != lo || f.ReplyPort != 43027 ||
		!slices.Equal(names(&f), names(&s)) {
		t.Fatalf("#4 search %+v %v", f, err)
	}
	// #30 over TCP: big endian on a little-endian connection, reply port zero
	m30 := onlyMessage(t, 30)
	if !m30.H.BigEndian() || !m30.TCP {
		t.Fatalf("#30 header %+v", m30.H)
	}
	if err := s.Decode(m30.Payload, true); err != nil || s.ReplyPort != 0 || !s.Unicast() ||
		!slices.Equal(names(&s), []string{"12345678=cap:a:mbox2"}) {
		t.Fatalf("#30 %+v %v", s, err)
	}
	// #39 discovery ping and its forwarded copy #40
	m39 := onlyMessage(t, 39)
	if err := s.Decode(m39.Payload, true); err != nil || !s.IsDiscovery() || !s.MustReply() || s.Flags != 0x81 {
		t.Fatalf("#39 %+v %v", s, err)
	}
	fwd, err = AppendForward(nil, lo, m39.Raw, lo)
	if err != nil || !bytes.Equal(fwd, block(t, 40).Data) {
		t.Fatalf("ping forward %x %v", fwd, err)
	}
}

func TestCaptureSearchResponses(t *testing.T) {
	for _, tc := range []struct {
		block int
		guid  string
		port  uint16
		found bool
		cids  []uint32
		addr  Address
	}{
		{5, "8436c7fc297cb73e27d1e86b", 5075, true, []uint32{0x12345679}, AnyIPv4},
		{6, "89e4cb73345dc98f69f612ab", 5085, true, []uint32{0x12345678}, AnyIPv4},
		{31, "8436c7fc297cb73e27d1e86b", 5075, true, []uint32{0x12345678}, AnyIPv4}, // TCP, little endian
		{41, "89e4cb73345dc98f69f612ab", 5085, false, nil, AnyIPv4},
		{42, "8436c7fc297cb73e27d1e86b", 5075, false, nil, AnyIPv4},
		// pvAccessCPP over UDP: little endian, its bound address
		{94, "de83116b0000000069750922", 5075, true, []uint32{0x12345678}, lo},
	} {
		m := onlyMessage(t, tc.block)
		var r SearchResponse
		if err := r.Decode(m.Payload, m.H.BigEndian()); err != nil {
			t.Fatal(err)
		}
		if r.GUID != mustGUID(t, tc.guid) || r.Seq != SearchSeqFind || r.Port != tc.port || r.Found != tc.found ||
			string(r.Protocol) != "tcp" || r.Addr != tc.addr || !slices.Equal(r.CIDs, tc.cids) {
			t.Errorf("block #%d: %+v", tc.block, r)
		}
		// what pvans sends: same fields, the header flags of that transport
		flags := uint8(FlagServer)
		if m.H.BigEndian() != (tc.block != 31 && tc.block != 94) {
			t.Errorf("block #%d: big endian %v", tc.block, m.H.BigEndian())
		}
		if m.H.BigEndian() {
			flags |= FlagBigEndian
		}
		got := AppendSearchResponse(nil, flags, &SearchResponse{GUID: mustGUID(t, tc.guid), Seq: SearchSeqFind,
			Addr: tc.addr, Port: tc.port, Protocol: []byte("tcp"), Found: tc.found, CIDs: tc.cids})
		if !bytes.Equal(got, m.Raw) {
			t.Errorf("block #%d\n got %x\nwant %x", tc.block, got, m.Raw)
		}
	}
}

func TestCaptureValidation(t *testing.T) {
	// server greeting #7 (PVXS) and #73 (pvAccessCPP: its own buffer size)
	for _, tc := range []struct {
		block int
		buf   uint32
	}{{7, DefaultBufferSize}, {73, 0x4400}} {
		ms := blockMessages(t, tc.block)
		if len(ms) != 2 || !ms[0].H.Control() || ms[0].H.Command != CtrlSetByteOrder || ms[0].H.BigEndian() {
			t.Fatalf("#%d %+v", tc.block, ms)
		}
		var v ServerValidation
		if err := v.Decode(ms[1].Payload, false); err != nil || v.BufferSize != tc.buf ||
			v.RegistrySize != DefaultRegistrySize || !slices.Equal(v.AuthMethods, []string{"anonymous", "ca"}) {
			t.Fatalf("#%d %+v %v", tc.block, v, err)
		}
	}
	greet := AppendSetByteOrder(nil, FlagServer)
	greet = AppendServerValidation(greet, FlagServer, &ServerValidation{BufferSize: DefaultBufferSize,
		RegistrySize: DefaultRegistrySize, AuthMethods: []string{"anonymous", "ca"}})
	if !bytes.Equal(greet, block(t, 7).Data) {
		t.Fatalf("greeting %x", greet)
	}
	// client answers: PVXS #9 ("ca", empty user/host), pvAccessCPP #54 (through the 0xFD cache)
	for _, tc := range []struct {
		block      int
		user, host string
	}{{9, "", ""}, {54, "root", "capture"}} {
		m := onlyMessage(t, tc.block)
		var v ClientValidation
		if err := v.Decode(m.Payload, false); err != nil || v.AuthMethod != "ca" {
			t.Fatalf("#%d %+v %v", tc.block, v, err)
		}
		tc2 := &TypeCache{}
		a, err := v.Auth(false, tc2)
		if err != nil || a.Field("user") == nil || a.Field("user").Str != tc.user || a.Field("host").Str != tc.host {
			t.Fatalf("#%d auth %+v %v", tc.block, a, err)
		}
		if tc.block == 54 {
			if d, ok := tc2.Get(1); !ok || d != a.Type {
				t.Fatalf("#54 did not define cache key 1")
			}
		}
	}
	// validated #11
	m := onlyMessage(t, 11)
	st, err := DecodeConnectionValidated(m.Payload, false)
	if err != nil || st != (Status{}) || !st.OK() {
		t.Fatalf("#11 %+v %v", st, err)
	}
	if got := AppendConnectionValidated(nil, FlagServer, Status{}); !bytes.Equal(got, m.Raw) {
		t.Fatalf("validated %x", got)
	}
}

func TestCaptureCreateChannel(t *testing.T) {
	for _, tc := range []struct {
		req, rep int
		cid, sid uint32
		name     string
	}{
		{13, 15, 0x12345678, 0x07050301, "cap:b:mbox3"},
		{46, 47, 0x12345678, 0x07050301, "server"},
		{56, 57, 0x10203041, 0x07050301, "server"}, // pvAccessCPP client
		{76, 77, 0x10203041, 0x12003401, "server"}, // pvAccessCPP both sides
	} {
		m := onlyMessage(t, tc.req)
		var c CreateChannel
		if err := c.Decode(m.Payload, false); err != nil || len(c.Channels) != 1 || c.Channels[0] != (ChannelRequest{tc.cid, tc.name}) {
			t.Fatalf("#%d %+v %v", tc.req, c, err)
		}
		r := onlyMessage(t, tc.rep)
		var rp CreateChannelReply
		if err := rp.Decode(r.Payload, false); err != nil || rp.CID != tc.cid || rp.SID != tc.sid || !rp.Status.OK() {
			t.Fatalf("#%d %+v %v", tc.rep, rp, err)
		}
		got := AppendCreateChannelReply(nil, FlagServer, &CreateChannelReply{CID: tc.cid, SID: tc.sid})
		if !bytes.Equal(got, r.Raw) {
			t.Fatalf("#%d\n got %x\nwant %x", tc.rep, got, r.Raw)
		}
	}
	var d RequestRef
	m := onlyMessage(t, 52)
	if err := d.Decode(m.Payload, false); err != nil || d.SID != 0x07050301 || d.IOID != 0x10002000 {
		t.Fatalf("#52 %+v %v", d, err)
	}
}

// rpcExchange decodes an RPC INIT, INIT reply, EXEC and EXEC reply, the
// requests through one cache and the replies through another, as a
// connection does.
func rpcExchange(t *testing.T, blocks [4]int) (init *RPCRequest, exec *RPCRequest, reply *RPCReply) {
	t.Helper()
	up, down := &TypeCache{}, &TypeCache{}
	// the pvAccessCPP client's validation defines key 1 first
	if v := blocks[0] - 4; cacheFormBlocks[v] {
		var cv ClientValidation
		m := onlyMessage(t, v)
		if err := cv.Decode(m.Payload, false); err != nil {
			t.Fatal(err)
		}
		if _, err := cv.Auth(false, up); err != nil {
			t.Fatal(err)
		}
	}
	init, exec, reply = &RPCRequest{}, &RPCRequest{}, &RPCReply{}
	var ir RPCReply
	for i, dst := range []interface {
		Decode([]byte, bool, *TypeCache) error
	}{init, &ir, exec, reply} {
		m := onlyMessage(t, blocks[i])
		tc := up
		if m.H.FromServer() {
			tc = down
		}
		if err := dst.Decode(m.Payload, m.H.BigEndian(), tc); err != nil {
			t.Fatalf("#%d: %v", blocks[i], err)
		}
	}
	if !init.IsInit() || init.Value == nil || init.Value.Field("field") == nil {
		t.Fatalf("#%d pvRequest %+v", blocks[0], init.Value)
	}
	if !ir.IsInit() || !ir.Status.OK() || ir.IOID != init.IOID || ir.Value != nil {
		t.Fatalf("#%d init reply %+v", blocks[1], ir)
	}
	if exec.IsInit() || exec.IOID != init.IOID || reply.IOID != init.IOID || reply.Subcmd != exec.Subcmd || !reply.Status.OK() {
		t.Fatalf("exec %+v reply %+v", exec, reply)
	}
	return init, exec, reply
}

func TestCaptureRPCChannels(t *testing.T) {
	for _, tc := range []struct {
		blocks [4]int
		op     string
		names  []string
	}{
		{[4]int{48, 49, 50, 51}, OpChannels, []string{"cap:a:mbox1", "cap:a:mbox2"}}, // PVXS both sides
		{[4]int{58, 59, 60, 61}, OpChannels, []string{"cap:b:mbox3"}},                // pvlist → PVXS
		{[4]int{78, 79, 80, 81}, OpChannels, []string{"cap:c:mbox"}},                 // pvlist → pvAccessCPP
		{[4]int{87, 88, 89, 90}, OpChannels, []string{"cap:c:mbox"}},                 // pvxlist → pvAccessCPP
	} {
		_, exec, reply := rpcExchange(t, tc.blocks)
		path, op, err := NTURIOp(exec.Value)
		if err != nil || path != "server" || op != tc.op {
			t.Errorf("#%d: path %q op %q %v", tc.blocks[2], path, op, err)
		}
		got, err := ChannelListNames(reply.Value)
		if err != nil || !slices.Equal(got, tc.names) {
			t.Errorf("#%d: names %q %v", tc.blocks[3], got, err)
		}
	}
	// pvxlist's argument and PVXS's reply, as pvans would build them
	m50, m51 := onlyMessage(t, 50), onlyMessage(t, 51)
	arg := AppendRPCRequest(nil, 0, &RPCRequest{SID: 0x07050301, IOID: 0x10002000, Value: NewNTURI("server", OpChannels)})
	if !bytes.Equal(arg, m50.Raw) {
		t.Errorf("NTURI argument\n got %x\nwant %x", arg, m50.Raw)
	}
	rep := AppendRPCReply(nil, FlagServer, &RPCReply{IOID: 0x10002000,
		Value: NewChannelList([]string{"cap:a:mbox1", "cap:a:mbox2"})})
	if !bytes.Equal(rep, m51.Raw) {
		t.Errorf("channels reply\n got %x\nwant %x", rep, m51.Raw)
	}
	init := AppendRPCRequest(nil, 0, &RPCRequest{SID: 0x07050301, IOID: 0x10002000, Subcmd: SubcmdInit,
		Value: NewValue(Struct("", M("field", Struct(""))))})
	if !bytes.Equal(init, onlyMessage(t, 48).Raw) {
		t.Errorf("RPC INIT %x", init)
	}
	ir := AppendRPCReply(nil, FlagServer, &RPCReply{IOID: 0x10002000, Subcmd: SubcmdInit})
	if !bytes.Equal(ir, onlyMessage(t, 49).Raw) {
		t.Errorf("RPC INIT reply %x", ir)
	}
}

func TestCaptureRPCInfo(t *testing.T) {
	_, exec, reply := rpcExchange(t, [4]int{67, 68, 69, 70})
	if _, op, err := NTURIOp(exec.Value); err != nil || op != OpInfo {
		t.Fatalf("op %q %v", op, err)
	}
	if bytes.Equal(AppendRPCRequest(nil, 0, &RPCRequest{SID: 0x07050301, IOID: 0x10002000,
		Value: NewNTURI("server", OpInfo)}), onlyMessage(t, 69).Raw) == false {
		t.Errorf("info argument differs")
	}
	ver := reply.Value.Field("version")
	if ver == nil || ver.Str != "PVXS 1.5.2 (1.5.2-29-g788f838dfcaffaf13063-dirty)" || reply.Value.Field("implLang").Str != "cpp" {
		t.Fatalf("info reply %+v", reply.Value)
	}
	got := AppendRPCReply(nil, FlagServer, &RPCReply{IOID: 0x10002000, Value: NewServerInfo("cpp", ver.Str)})
	if !bytes.Equal(got, onlyMessage(t, 70).Raw) {
		t.Fatalf("info reply\n got %x\nwant %x", got, onlyMessage(t, 70).Raw)
	}
}

func TestCaptureGetNTScalarDouble(t *testing.T) {
	var init, exec GetRequest
	if err := init.Decode(onlyMessage(t, 17).Payload, false, nil); err != nil || !init.IsInit() ||
		init.SID != 0x07050301 || init.IOID != 0x10002000 || init.PVRequest.Field("field") == nil {
		t.Fatalf("#17 %+v %v", init, err)
	}
	if err := exec.Decode(onlyMessage(t, 21).Payload, false, nil); err != nil || exec.IsInit() || exec.PVRequest != nil {
		t.Fatalf("#21 %+v %v", exec, err)
	}
	// the simulator's answers: INIT reply with the type (#19), EXEC reply with value 42 (#23)
	got := AppendGetReply(nil, FlagServer, &GetReply{IOID: 0x10002000, Subcmd: SubcmdInit, Type: NTScalarDoubleType()})
	if !bytes.Equal(got, onlyMessage(t, 19).Raw) {
		t.Fatalf("GET INIT reply\n got %x\nwant %x", got, onlyMessage(t, 19).Raw)
	}
	var ir, er GetReply
	if err := ir.Decode(onlyMessage(t, 19).Payload, false, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := er.Decode(onlyMessage(t, 23).Payload, false, nil, ir.Type); err != nil {
		t.Fatal(err)
	}
	if er.Value.Field("value").Float != 42 || !slices.Equal(er.Changed, BitSet{0x3a}) {
		t.Fatalf("#23 %+v", er)
	}
	var changed BitSet
	for _, f := range []int{1, 3, 4, 5} { // value, alarm.severity, alarm.status, alarm.message
		changed.Set(f)
	}
	got = AppendGetReply(nil, FlagServer, &GetReply{IOID: 0x10002000, Changed: changed, Value: NewNTScalarDouble(42)})
	if !bytes.Equal(got, onlyMessage(t, 23).Raw) {
		t.Fatalf("GET EXEC reply\n got %x\nwant %x", got, onlyMessage(t, 23).Raw)
	}
	// pvAccessCPP #101/#103: cached type, bit 0 = whole structure
	tc := &TypeCache{}
	if err := ir.Decode(onlyMessage(t, 101).Payload, false, tc, nil); err != nil || ir.Type.Index("value") != 0 {
		t.Fatalf("#101 %+v %v", ir, err)
	}
	er = GetReply{}
	if err := er.Decode(onlyMessage(t, 103).Payload, false, tc, ir.Type); err != nil || !er.Changed.Has(0) ||
		er.Value.Field("value").Str != "" {
		t.Fatalf("#103 %+v %v", er, err)
	}
}
