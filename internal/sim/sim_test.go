package sim

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
)

var loopback = netip.MustParseAddr("127.0.0.1")

func startSite(t *testing.T, o Options) *Site {
	t.Helper()
	s, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// udpSearch sends one search for names to dst and collects the responses
// that arrive within wait.
func udpSearch(t *testing.T, dst netip.AddrPort, flags uint8, wait time.Duration, names ...string) []pva.SearchResponse {
	t.Helper()
	return udpSearchProtos(t, dst, flags, []string{"tcp"}, wait, names...)
}

// udpSearchProtos is udpSearch listing protos.
func udpSearchProtos(t *testing.T, dst netip.AddrPort, flags uint8, protos []string, wait time.Duration, names ...string) []pva.SearchResponse {
	t.Helper()
	uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopback, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	s := pva.Search{Seq: 0x1234, Flags: flags, ReplyPort: uint16(uc.LocalAddr().(*net.UDPAddr).Port)}
	for _, p := range protos {
		s.Protocols = append(s.Protocols, []byte(p))
	}
	for i, n := range names {
		s.Names = append(s.Names, pva.SearchName{CID: uint32(100 + i), Name: []byte(n)})
	}
	if _, err := uc.WriteToUDPAddrPort(pva.AppendSearch(nil, pva.FlagBigEndian, &s), dst); err != nil {
		t.Fatal(err)
	}
	var out []pva.SearchResponse
	buf := make([]byte, 2048)
	deadline := time.Now().Add(wait)
	for {
		_ = uc.SetReadDeadline(deadline)
		n, _, err := uc.ReadFromUDPAddrPort(buf)
		if err != nil {
			return out
		}
		h, p, _, err := pva.SplitMessage(buf[:n])
		if err != nil || h.Command != pva.CmdSearchResponse {
			t.Fatalf("bad reply: %v %v", h, err)
		}
		var r pva.SearchResponse
		if err := r.Decode(p, h.BigEndian()); err != nil {
			t.Fatal(err)
		}
		r.Protocol = slices.Clone(r.Protocol)
		r.CIDs = slices.Clone(r.CIDs)
		out = append(out, r)
	}
}

func TestUDPSearchAnswersWithGUIDAndPort(t *testing.T) {
	s := startSite(t, Options{Servers: 2, NamesPerServer: 3})
	a, b := s.Server(0), s.Server(1)
	if a.GUID == b.GUID || a.GUID.IsZero() {
		t.Fatalf("GUIDs %s %s", a.GUID, b.GUID)
	}
	// Direct to server 1's own socket: one name it holds, one it does not.
	got := udpSearch(t, b.UDP, 0, 300*time.Millisecond, "sim:s1:pv2", "sim:s0:pv0", "nope")
	if len(got) != 1 {
		t.Fatalf("got %d replies, want 1", len(got))
	}
	r := got[0]
	if r.GUID != b.GUID || r.Port != b.TCP.Port() || !r.Found || string(r.Protocol) != "tcp" ||
		!slices.Equal(r.CIDs, []uint32{100}) || r.Seq != 0x1234 || !r.Addr.IsAny() {
		t.Fatalf("reply %+v, want guid %s port %d cid 100", r, b.GUID, b.TCP.Port())
	}
	// Through the site fan-out: each owner answers with its own identity.
	got = udpSearch(t, s.UDPAddr(), 0, 300*time.Millisecond, "sim:s1:pv2", "sim:s0:pv0")
	if len(got) != 2 {
		t.Fatalf("fan-out: got %d replies, want 2", len(got))
	}
	for _, r := range got {
		want := map[pva.GUID][]uint32{a.GUID: {101}, b.GUID: {100}}[r.GUID]
		if !slices.Equal(r.CIDs, want) {
			t.Fatalf("fan-out reply %s cids %v want %v", r.GUID, r.CIDs, want)
		}
	}
	// Nothing claimed: silence, unless MustReply (a discovery ping).
	if got := udpSearch(t, a.UDP, 0, 150*time.Millisecond, "nope"); len(got) != 0 {
		t.Fatalf("unclaimed search answered: %+v", got)
	}
	got = udpSearch(t, a.UDP, pva.SearchMustReply, 300*time.Millisecond)
	if len(got) != 1 || got[0].Found || len(got[0].CIDs) != 0 || got[0].GUID != a.GUID {
		t.Fatalf("ping reply %+v", got)
	}
}

func TestRestartChangesGUIDKeepsPort(t *testing.T) {
	s := startSite(t, Options{Servers: 1, NamesPerServer: 1})
	before := s.Server(0)
	if err := s.Restart(0); err != nil {
		t.Fatal(err)
	}
	after := s.Server(0)
	if after.GUID == before.GUID || after.TCP != before.TCP || after.State != Running {
		t.Fatalf("before %+v after %+v", before, after)
	}
	got := udpSearch(t, after.UDP, 0, 300*time.Millisecond, "sim:s0:pv0")
	if len(got) != 1 || got[0].GUID != after.GUID {
		t.Fatalf("after restart: %+v", got)
	}
}

func TestKillIsSilentButOpen(t *testing.T) {
	s := startSite(t, Options{Servers: 1, NamesPerServer: 1})
	inf := s.Server(0)
	c := dialClient(t, inf.TCP) // handshake done while alive
	if err := s.Kill(0); err != nil {
		t.Fatal(err)
	}
	if got := udpSearch(t, inf.UDP, pva.SearchMustReply, 200*time.Millisecond, "sim:s0:pv0"); len(got) != 0 {
		t.Fatalf("killed server answered UDP: %+v", got)
	}
	if got := udpSearch(t, s.UDPAddr(), pva.SearchMustReply, 200*time.Millisecond, "sim:s0:pv0"); len(got) != 0 {
		t.Fatalf("killed server answered via fan-out: %+v", got)
	}
	// The TCP connection stays open but ECHO goes unanswered.
	c.send(pva.AppendEcho(nil, 0, []byte("hi")))
	_ = c.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.br.ReadByte(); err == nil || !isTimeout(err) {
		t.Fatalf("read on killed server: %v, want timeout", err)
	}
	// A new connection is accepted but gets no greeting.
	nc, err := net.Dial("tcp", inf.TCP.String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := nc.Read(make([]byte, 8)); !isTimeout(err) {
		t.Fatalf("greeting from killed server: %v", err)
	}
	if s.Server(0).State != Silent {
		t.Fatal("state not silent")
	}
	// Stop closes cleanly: the open connection sees EOF.
	if err := s.Stop(0); err != nil {
		t.Fatal(err)
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadAll(c.br); err != nil {
		t.Fatalf("after Stop: %v, want EOF", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// client is a minimal PVA TCP client for the tests.
type client struct {
	t     *testing.T
	nc    net.Conn
	br    *bufio.Reader
	types pva.TypeCache
}

func dialClient(t *testing.T, addr netip.AddrPort) *client {
	t.Helper()
	nc, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	return handshake(t, nc)
}

// handshake runs the connection validation on nc (plain or TLS).
func handshake(t *testing.T, nc net.Conn) *client {
	t.Helper()
	t.Cleanup(func() { nc.Close() })
	c := &client{t: t, nc: nc, br: bufio.NewReader(nc)}
	h, _ := c.read()
	if !h.Control() || h.Command != pva.CtrlSetByteOrder || !h.FromServer() {
		t.Fatalf("first message %+v", h)
	}
	h, p := c.read()
	var v pva.ServerValidation
	if h.Command != pva.CmdConnectionValidation || v.Decode(p, h.BigEndian()) != nil ||
		!slices.Equal(v.AuthMethods, []string{"anonymous", "ca"}) {
		t.Fatalf("validation %+v %+v", h, v)
	}
	c.send(pva.AppendClientValidation(nil, 0, &pva.ClientValidation{BufferSize: 0x10000, RegistrySize: 0x7FFF,
		AuthMethod: "ca", AuthPayload: pva.CAAuthPayload(false, "u", "h")}))
	h, p = c.read()
	st, err := pva.DecodeConnectionValidated(p, h.BigEndian())
	if h.Command != pva.CmdConnectionValidated || err != nil || st.Type != pva.StatusOK {
		t.Fatalf("validated %+v %v %v", h, st, err)
	}
	return c
}

func (c *client) send(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) read() (pva.Header, []byte) {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hb [8]byte
	if _, err := io.ReadFull(c.br, hb[:]); err != nil {
		c.t.Fatal(err)
	}
	h, err := pva.DecodeHeader(hb[:])
	if err != nil {
		c.t.Fatal(err)
	}
	if !h.FromServer() {
		c.t.Fatalf("server message without server flag: %+v", h)
	}
	p := make([]byte, h.PayloadLen())
	if _, err := io.ReadFull(c.br, p); err != nil {
		c.t.Fatal(err)
	}
	return h, p
}

func (c *client) create(cid uint32, name string) pva.CreateChannelReply {
	c.t.Helper()
	c.send(pva.AppendCreateChannel(nil, 0, &pva.CreateChannel{Channels: []pva.ChannelRequest{{CID: cid, Name: name}}}))
	h, p := c.read()
	var r pva.CreateChannelReply
	if h.Command != pva.CmdCreateChannel || r.Decode(p, h.BigEndian()) != nil || r.CID != cid {
		c.t.Fatalf("create reply %+v %+v", h, r)
	}
	return r
}

func (c *client) rpc(sid uint32, op string) pva.RPCReply {
	c.t.Helper()
	pvReq := pva.NewValue(pva.Struct("", pva.M("field", pva.Struct(""))))
	c.send(pva.AppendRPCRequest(nil, 0, &pva.RPCRequest{SID: sid, IOID: 7, Subcmd: pva.SubcmdInit, Value: pvReq}))
	h, p := c.read()
	var r pva.RPCReply
	if h.Command != pva.CmdRPC || r.Decode(p, h.BigEndian(), &c.types) != nil || !r.IsInit() || !r.Status.OK() {
		c.t.Fatalf("rpc init %+v %+v", h, r)
	}
	c.send(pva.AppendRPCRequest(nil, 0, &pva.RPCRequest{SID: sid, IOID: 7, Value: pva.NewNTURI("server", op)}))
	h, p = c.read()
	r = pva.RPCReply{}
	if h.Command != pva.CmdRPC || r.Decode(p, h.BigEndian(), &c.types) != nil || r.IOID != 7 {
		c.t.Fatalf("rpc exec %+v %+v", h, r)
	}
	return r
}

func TestServerRPCListsNames(t *testing.T) {
	s := startSite(t, Options{Servers: 2, NamesPerServer: 4, NameLen: 30})
	inf := s.Server(1)
	c := dialClient(t, inf.TCP)
	ch := c.create(1, "server")
	if !ch.Status.OK() || ch.SID == pva.RefusedSID {
		t.Fatalf("server channel refused: %+v", ch)
	}
	r := c.rpc(ch.SID, pva.OpChannels)
	got, err := pva.ChannelListNames(r.Value)
	if err != nil || !r.Status.OK() {
		t.Fatal(err, r.Status)
	}
	want := GenerateNames(1, 4, 30)
	slices.Sort(want)
	if !slices.Equal(got, want) || !slices.Equal(got, inf.Names) {
		t.Fatalf("channels %q want %q", got, want)
	}
	if r.Value.Type.ID != pva.NTScalarArrayID || r.Value.Field("alarm.severity") == nil {
		t.Fatalf("not PVXS's NTScalarArray: %+v", r.Value.Type)
	}

	r = c.rpc(ch.SID, pva.OpInfo)
	if !r.Status.OK() || r.Value.Field("implLang").Str != "cpp" || r.Value.Field("version").Str == "" {
		t.Fatalf("info %+v", r)
	}
	if r = c.rpc(ch.SID, "bogus"); r.Status.OK() {
		t.Fatal("unknown op accepted")
	}

	// SetNames: new list, beacon change count bumped.
	if err := s.SetNames(1, []string{"b", "a"}); err != nil {
		t.Fatal(err)
	}
	r = c.rpc(ch.SID, pva.OpChannels)
	if got, _ := pva.ChannelListNames(r.Value); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after SetNames: %q", got)
	}
	if s.Server(1).ChangeCount != 1 {
		t.Fatalf("change count %d", s.Server(1).ChangeCount)
	}
}

// The GET exchange pvxget does after a name server redirects it (capture
// #13-#26): CREATE_CHANNEL, GET INIT, GET EXEC, DESTROY_REQUEST.
func TestGetDouble(t *testing.T) {
	s := startSite(t, Options{Servers: 1, NamesPerServer: 3, Clock: clock.NewFake(time.Now())})
	c := dialClient(t, s.Server(0).TCP)
	if r := c.create(9, "missing"); r.SID != pva.RefusedSID || r.Status.Type != pva.StatusFatal {
		t.Fatalf("unknown name not refused: %+v", r)
	}
	ch := c.create(5, "sim:s0:pv2")
	pvReq := pva.NewValue(pva.Struct("", pva.M("field", pva.Struct(""))))
	c.send(AppendGetRequest(nil, 0, &pva.GetRequest{SID: ch.SID, IOID: 3, Subcmd: pva.SubcmdInit, PVRequest: pvReq}))
	h, p := c.read()
	var g pva.GetReply
	if h.Command != pva.CmdGet || decodeGetReply(&g, p, h.BigEndian(), &c.types, nil) != nil || g.Type == nil || g.Type.ID != pva.NTScalarID {
		t.Fatalf("get init %+v %+v", h, g)
	}
	typ := g.Type
	c.send(AppendGetRequest(nil, 0, &pva.GetRequest{SID: ch.SID, IOID: 3}))
	h, p = c.read()
	if err := decodeGetReply(&g, p, h.BigEndian(), &c.types, typ); err != nil || !g.Status.OK() {
		t.Fatal(err, g.Status)
	}
	if v := g.Value.Field("value").Float; v != 2 {
		t.Fatalf("value %v want 2", v)
	}
	if g.Value.Field("timeStamp.secondsPastEpoch").Int < time.Now().Unix()-60 {
		t.Fatal("no timestamp")
	}
	c.send(pva.AppendRequestRef(nil, 0, pva.CmdDestroyRequest, &pva.RequestRef{SID: ch.SID, IOID: 3}))
	c.send(pva.AppendDestroyChannel(nil, 0, &pva.DestroyChannel{SID: ch.SID, CID: 5}))
	h, p = c.read()
	var d pva.DestroyChannel
	if h.Command != pva.CmdDestroyChannel || d.Decode(p, h.BigEndian()) != nil || d.SID != ch.SID || d.CID != 5 {
		t.Fatalf("destroy reply %+v %+v", h, d)
	}
}

func TestTCPSearchAndEcho(t *testing.T) {
	s := startSite(t, Options{Servers: 1, NamesPerServer: 2})
	inf := s.Server(0)
	c := dialClient(t, inf.TCP)
	// Two pipelined searches, BE as PVXS clients send them, then an echo.
	for i, n := range []string{"sim:s0:pv1", "absent"} {
		c.send(pva.AppendSearch(nil, pva.FlagBigEndian, &pva.Search{Seq: uint32(i), Flags: pva.SearchUnicast,
			Protocols: [][]byte{[]byte("tcp")}, Names: []pva.SearchName{{CID: 40, Name: []byte(n)}}}))
	}
	c.send(pva.AppendEcho(nil, 0, []byte("ping")))
	h, p := c.read()
	var r pva.SearchResponse
	if h.Command != pva.CmdSearchResponse || r.Decode(p, h.BigEndian()) != nil ||
		r.Seq != 0 || r.GUID != inf.GUID || r.Port != inf.TCP.Port() || !slices.Equal(r.CIDs, []uint32{40}) {
		t.Fatalf("tcp search reply %+v %+v", h, r)
	}
	h, p = c.read() // the unclaimed search got no reply: next is the echo
	if h.Command != pva.CmdEcho || string(p) != "ping" {
		t.Fatalf("echo %+v %q", h, p)
	}
}

func TestBeaconSchedule(t *testing.T) {
	rx, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopback, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	fc := clock.NewFake(time.Time{})
	s := startSite(t, Options{Servers: 1, NamesPerServer: 1, Clock: fc,
		BeaconDests: []netip.AddrPort{rx.LocalAddr().(*net.UDPAddr).AddrPort()}})
	inf := s.Server(0)
	buf := make([]byte, 1500)
	recv := func() (n int, last pva.Beacon) {
		for {
			_ = rx.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			k, src, err := rx.ReadFromUDPAddrPort(buf)
			if err != nil {
				return n, last
			}
			h, p, _, err := pva.SplitMessage(buf[:k])
			if err != nil || h.Command != pva.CmdBeacon || !h.BigEndian() || last.Decode(p, true) != nil {
				t.Fatalf("bad beacon %+v %v", h, err)
			}
			if src != inf.UDP || last.GUID != inf.GUID || last.Port != inf.TCP.Port() || last.Protocol != "tcp" {
				t.Fatalf("beacon %+v from %s", last, src)
			}
			n++
		}
	}
	if n, _ := recv(); n != 1 {
		t.Fatalf("at start: %d beacons, want 1", n)
	}
	fc.Advance(150 * time.Second) // t = 15 … 150: ten more
	if n, b := recv(); n != 10 || b.Sequence != 10 {
		t.Fatalf("fast phase: %d beacons (seq %d), want 10", n, b.Sequence)
	}
	fc.Advance(179 * time.Second)
	if n, _ := recv(); n != 0 {
		t.Fatalf("before 330 s: %d beacons", n)
	}
	_ = s.SetNames(0, []string{"x"})
	fc.Advance(time.Second)
	if n, b := recv(); n != 1 || b.ChangeCount != 1 {
		t.Fatalf("at 330 s: %d beacons, change count %d", n, b.ChangeCount)
	}
	_ = s.Kill(0)
	fc.Advance(180 * time.Second)
	if n, _ := recv(); n != 0 {
		t.Fatalf("killed server sent %d beacons", n)
	}
}

func TestGenerateNamesLength(t *testing.T) {
	names := GenerateNames(3, 2000, 40)
	total := 0
	seen := map[string]bool{}
	for _, n := range names {
		total += len(n)
		if seen[n] || len(n) < 20 || len(n) > 60 {
			t.Fatalf("name %q (len %d) duplicate or out of range", n, len(n))
		}
		seen[n] = true
	}
	if mean := total / len(names); mean < 37 || mean > 43 {
		t.Fatalf("mean length %d, want ~40", mean)
	}
	if !slices.Equal(names[:5], GenerateNames(3, 5, 40)) {
		t.Fatal("not deterministic")
	}
	if GenerateNames(1, 1, 0)[0] != "sim:s1:pv0" {
		t.Fatal("plain form")
	}
}

// BenchmarkClaim is the simulator's per-search work: look up one packed
// datagram's worth of names (38 names of 30 bytes, half held).
func BenchmarkClaim(b *testing.B) {
	names := GenerateNames(0, 1000, 30)
	srv := &server{}
	srv.names.Store(newNameSet(names))
	in := &instance{srv: srv}
	var req []pva.SearchName
	for j := 0; j < 38; j++ {
		n := names[j*20]
		if j%2 == 1 {
			n = "miss:" + n
		}
		req = append(req, pva.SearchName{CID: uint32(j), Name: []byte(n)})
	}
	cids := make([]uint32, 0, 38)
	b.ReportAllocs()
	for b.Loop() {
		cids = in.claim(req, cids[:0])
	}
	if len(cids) != 19 {
		b.Fatalf("claimed %d", len(cids))
	}
}

// initOp sends an INIT of cmd (GET, PUT or MONITOR) with PVXS's default
// pvRequest and returns the type of the reply.
func (c *client) initOp(cmd pva.Command, sid, ioid uint32) *pva.FieldDesc {
	c.t.Helper()
	pvReq := pva.NewValue(pva.Struct("", pva.M("field", pva.Struct(""))))
	switch cmd {
	case pva.CmdPut:
		c.send(AppendPutRequest(nil, 0, &PutRequest{SID: sid, IOID: ioid, Subcmd: pva.SubcmdInit, PVRequest: pvReq}))
	case pva.CmdMonitor:
		c.send(AppendMonitorRequest(nil, 0, &MonitorRequest{SID: sid, IOID: ioid, Subcmd: pva.SubcmdInit, PVRequest: pvReq}))
	}
	h, p := c.read()
	var typ *pva.FieldDesc
	var err error
	switch cmd {
	case pva.CmdPut:
		var r PutReply
		err, typ = r.Decode(p, h.BigEndian(), &c.types, nil), r.Type
	case pva.CmdMonitor:
		var r MonitorReply
		err, typ = r.Decode(p, h.BigEndian(), &c.types, nil), r.Type
	}
	if h.Command != cmd || err != nil || typ == nil || typ.ID != pva.NTScalarID {
		c.t.Fatalf("%v INIT reply %+v %v", cmd, h, err)
	}
	return typ
}

func (c *client) monitorUpdate(typ *pva.FieldDesc, r *MonitorReply) float64 {
	c.t.Helper()
	h, p := c.read()
	if h.Command != pva.CmdMonitor {
		c.t.Fatalf("not a monitor update: %+v", h)
	}
	if err := r.Decode(p, h.BigEndian(), &c.types, typ); err != nil || r.IsInit() || r.IsFinish() {
		c.t.Fatalf("update %+v %v", r, err)
	}
	return r.Value.Field("value").Float
}

// What pvxinfo, pvxput and pvxmonitor do against one server, on a fake
// clock: the values count once an UpdateInterval.
func TestGetFieldPutMonitor(t *testing.T) {
	fc := clock.NewFake(time.Now())
	s := startSite(t, Options{Servers: 2, NamesPerServer: 3, Clock: fc})
	c := dialClient(t, s.Server(1).TCP)
	ch := c.create(1, "sim:s1:pv2")

	c.send(AppendGetFieldRequest(nil, 0, &GetFieldRequest{SID: ch.SID, IOID: 1}))
	h, p := c.read()
	var gf GetFieldReply
	if h.Command != pva.CmdGetField || gf.Decode(p, h.BigEndian(), &c.types) != nil || !gf.Status.OK() ||
		gf.Type.ID != pva.NTScalarID || gf.Type.Members[0].Type.Code != pva.TypeFloat64 {
		t.Fatalf("GET_FIELD %+v %+v", h, gf)
	}

	mt := c.initOp(pva.CmdMonitor, ch.SID, 2)
	c.send(AppendMonitorRequest(nil, 0, &MonitorRequest{SID: ch.SID, IOID: 2, Subcmd: SubcmdMonitorStart}))
	var mr MonitorReply
	if v := c.monitorUpdate(mt, &mr); v != 100002 {
		t.Fatalf("first update %v, want the current value 100002", v)
	}
	fc.Advance(time.Second)
	if v := c.monitorUpdate(mt, &mr); v != 100003 {
		t.Fatalf("after a tick %v", v)
	}

	pt := c.initOp(pva.CmdPut, ch.SID, 3)
	var only pva.BitSet
	only.Set(1)
	c.send(AppendPutRequest(nil, 0, &PutRequest{SID: ch.SID, IOID: 3, Changed: only, Value: pva.NewNTScalarDouble(-7.5)}))
	h, p = c.read()
	var pr PutReply
	if h.Command != pva.CmdPut || pr.Decode(p, h.BigEndian(), &c.types, pt) != nil || !pr.Status.OK() || pr.Subcmd != 0 {
		t.Fatalf("PUT reply %+v %+v", h, pr)
	}
	if v := c.monitorUpdate(mt, &mr); v != -7.5 {
		t.Fatalf("monitor after put %v", v)
	}
	// get-before-put (PUT with 0x40) reads the value back
	c.send(AppendPutRequest(nil, 0, &PutRequest{SID: ch.SID, IOID: 3, Subcmd: pva.SubcmdGet}))
	h, p = c.read()
	if pr.Decode(p, h.BigEndian(), &c.types, pt) != nil || pr.Value.Field("value").Float != -7.5 {
		t.Fatalf("get via PUT %+v", pr)
	}
	fc.Advance(time.Second)
	if v := c.monitorUpdate(mt, &mr); v != -6.5 {
		t.Fatalf("counter after put %v, want -6.5", v)
	}
	// Stop: no updates; destroy: none either, and the op is gone.
	c.send(AppendMonitorRequest(nil, 0, &MonitorRequest{SID: ch.SID, IOID: 2, Subcmd: SubcmdMonitorStartStop}))
	c.send(pva.AppendRequestRef(nil, 0, pva.CmdDestroyRequest, &pva.RequestRef{SID: ch.SID, IOID: 2}))
	c.send(pva.AppendEcho(nil, 0, []byte("sync"))) // answered after the two above were handled
	if h, _ := c.read(); h.Command != pva.CmdEcho {
		t.Fatalf("got %+v, want the echo", h)
	}
	fc.Advance(time.Second)
	c.send(pva.AppendEcho(nil, 0, []byte("x")))
	if h, _ := c.read(); h.Command != pva.CmdEcho {
		t.Fatalf("after stop and destroy got %+v, want only the echo", h)
	}
	// Another connection sees the put value (one store per server).
	c2 := dialClient(t, s.Server(1).TCP)
	ch2 := c2.create(1, "sim:s1:pv2")
	c2.send(AppendPutRequest(nil, 0, &PutRequest{SID: ch2.SID, IOID: 1, Subcmd: pva.SubcmdInit, PVRequest: pva.NewValue(pva.Struct(""))}))
	c2.read()
	c2.send(AppendPutRequest(nil, 0, &PutRequest{SID: ch2.SID, IOID: 1, Subcmd: pva.SubcmdGet}))
	h, p = c2.read()
	if pr.Decode(p, h.BigEndian(), &c2.types, pt) != nil || pr.Value.Field("value").Float != -5.5 {
		t.Fatalf("second connection reads %+v", pr.Value.Field("value"))
	}
}

// A pipelined monitor (record._options.pipeline=true) gets no more
// updates than the client acknowledged; the news is kept, not lost.
func TestMonitorPipelineWindow(t *testing.T) {
	fc := clock.NewFake(time.Now())
	s := startSite(t, Options{NamesPerServer: 1, Clock: fc})
	c := dialClient(t, s.Server(0).TCP)
	ch := c.create(1, "sim:s0:pv0")
	opt := pva.Struct("", pva.M("pipeline", pva.Scalar(pva.TypeString)))
	req := pva.NewValue(pva.Struct("", pva.M("record", pva.Struct("", pva.M("_options", opt)))))
	req.Field("record._options.pipeline").Str = "true"
	c.send(AppendMonitorRequest(nil, 0, &MonitorRequest{SID: ch.SID, IOID: 2, Subcmd: pva.SubcmdInit | SubcmdMonitorAck, PVRequest: req, Nack: 1}))
	h, p := c.read()
	var mr MonitorReply
	if mr.Decode(p, h.BigEndian(), &c.types, nil) != nil || mr.Type == nil {
		t.Fatalf("init %+v", mr)
	}
	typ := mr.Type
	c.send(AppendMonitorRequest(nil, 0, &MonitorRequest{SID: ch.SID, IOID: 2, Subcmd: SubcmdMonitorStart}))
	if v := c.monitorUpdate(typ, &mr); v != 0 {
		t.Fatalf("first %v", v)
	}
	c.send(pva.AppendEcho(nil, 0, []byte("sync")))
	c.read()
	fc.Advance(time.Second) // window 0: held back
	c.send(pva.AppendEcho(nil, 0, []byte("x")))
	if h, _ := c.read(); h.Command != pva.CmdEcho {
		t.Fatalf("update beyond the window: %+v", h)
	}
	fc.Advance(time.Second)
	c.send(AppendMonitorRequest(nil, 0, &MonitorRequest{SID: ch.SID, IOID: 2, Subcmd: SubcmdMonitorAck, Nack: 1}))
	if v := c.monitorUpdate(typ, &mr); v != 2 {
		t.Fatalf("after ack %v, want the latest value 2", v)
	}
}

// The site controls the demo and pvans-sim expose.
func TestSiteControls(t *testing.T) {
	s := startSite(t, Options{Servers: 1, NamesPerServer: 2})
	inf := s.Server(0)
	c := dialClient(t, inf.TCP)
	// Kill holds the connection; Revive answers what was sent meanwhile.
	if err := s.Kill(0); err != nil {
		t.Fatal(err)
	}
	c.send(pva.AppendEcho(nil, 0, []byte("held")))
	_ = c.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.br.ReadByte(); !isTimeout(err) {
		t.Fatalf("killed server answered: %v", err)
	}
	if err := s.Revive(0); err != nil || s.Server(0).State != Running {
		t.Fatal(err)
	}
	if h, p := c.read(); h.Command != pva.CmdEcho || string(p) != "held" {
		t.Fatalf("after revive %+v %q", h, p)
	}
	// Names come and go; the change count follows.
	if err := s.AddNames(0, "extra:a", "sim:s0:pv0"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveNames(0, "sim:s0:pv1"); err != nil {
		t.Fatal(err)
	}
	if got := s.Server(0); !slices.Equal(got.Names, []string{"extra:a", "sim:s0:pv0"}) || got.ChangeCount != 2 {
		t.Fatalf("names %q change count %d", got.Names, got.ChangeCount)
	}
	// A new server has its own GUID and answers for its names.
	i, err := s.AddServer([]string{"new:x"})
	if err != nil || i != 1 || s.Len() != 2 {
		t.Fatal(i, err)
	}
	n := s.Server(1)
	if n.GUID == inf.GUID || n.State != Running {
		t.Fatalf("new server %+v", n)
	}
	if got := udpSearch(t, n.UDP, 0, 300*time.Millisecond, "new:x"); len(got) != 1 || got[0].GUID != n.GUID {
		t.Fatalf("new server search %+v", got)
	}
	// DropConnections: EOF for the client, the server keeps accepting.
	if err := s.DropConnections(0); err != nil {
		t.Fatal(err)
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadAll(c.br); err != nil {
		t.Fatalf("after DropConnections: %v, want EOF", err)
	}
	dialClient(t, inf.TCP)
	if a := s.Server(0).Accepted; a != 2 {
		t.Fatalf("accepted %d", a)
	}
	// A stopped server can be started again (Restart): new GUID.
	_ = s.Stop(1)
	if err := s.Revive(1); err == nil {
		t.Fatal("revived a stopped server")
	}
	if err := s.Restart(1); err != nil || s.Server(1).GUID == n.GUID || s.Server(1).State != Running {
		t.Fatal(err, s.Server(1))
	}
}

// The command form (what the demo and pvans-sim read) drives the same
// controls and reports what it did.
func TestExecCommands(t *testing.T) {
	s := startSite(t, Options{Servers: 2, NamesPerServer: 2})
	g1 := s.Server(1).GUID
	for _, c := range []struct{ line, want string }{
		{"help", "restart N"},
		{"restart 1", "server 1 restarted: GUID " + g1.String() + " → "},
		{"kill 0", "server 0 killed"},
		{"servers", "server 0  silent"},
		{"revive 0", "server 0 answers again"},
		{"stop 1", "server 1 stopped"},
		{"start 1", "server 1 started: GUID "},
		{"add 1 x:y", "server 1 now has 3 names (change count 1)"},
		{"remove 1 x:y sim:s1:pv0", "server 1 now has 1 names"},
		{"names 1", "sim:s1:pv1"},
		{"drop 0", "server 0 closed its TCP connections"},
		{"new a b", "server 2 started: GUID "},
		{"new", "2 names (sim:s3:pv0 …)"},
		{"", ""},
	} {
		got, err := s.Exec(c.line)
		if err != nil || !strings.Contains(got, c.want) {
			t.Fatalf("%q: %q %v, want %q", c.line, got, err, c.want)
		}
	}
	if s.Len() != 4 || s.Server(1).GUID == g1 || s.Server(0).State != Running {
		t.Fatalf("site after the commands: %+v", s.Servers())
	}
	for _, bad := range []string{"frobnicate", "restart", "restart 9", "kill x", "add 0", "remove 1"} {
		if _, err := s.Exec(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
	if _, err := ParseTimed("5s restart 1"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"restart 1", "5s", "-1s kill 0", "soon kill 0"} {
		if _, err := ParseTimed(bad); err == nil {
			t.Fatalf("ParseTimed(%q) accepted", bad)
		}
	}
}

// The server PV serves RPC alone: GET, PUT and MONITOR on it are refused
// in the INIT reply (as PVXS's ServerSource does) and not kept, so the
// IOID is free again.
func TestServerPVRefusesOtherOps(t *testing.T) {
	s := startSite(t, Options{Servers: 1, NamesPerServer: 1, Clock: clock.NewFake(time.Now())})
	c := dialClient(t, s.Server(0).TCP)
	ch := c.create(1, "server")
	pvReq := pva.NewValue(pva.Struct("", pva.M("field", pva.Struct(""))))
	for i := 0; i < 2; i++ { // the same IOID twice: a kept operation would make the second a fault
		c.send(AppendGetRequest(nil, 0, &pva.GetRequest{SID: ch.SID, IOID: 7, Subcmd: pva.SubcmdInit, PVRequest: pvReq}))
		h, p := c.read()
		var g pva.GetReply
		if h.Command != pva.CmdGet || decodeGetReply(&g, p, h.BigEndian(), &c.types, nil) != nil || g.Status.Message != "GET not implemented for this PV" || g.Type != nil {
			t.Fatalf("GET INIT on the server PV: %+v %+v", h, g)
		}
		c.send(AppendPutRequest(nil, 0, &PutRequest{SID: ch.SID, IOID: 7, Subcmd: pva.SubcmdInit, PVRequest: pvReq}))
		h, p = c.read()
		var pr PutReply
		if h.Command != pva.CmdPut || pr.Decode(p, h.BigEndian(), &c.types, nil) != nil || pr.Status.Message != "PUT not implemented for this PV" {
			t.Fatalf("PUT INIT on the server PV: %+v %+v", h, pr)
		}
		c.send(AppendMonitorRequest(nil, 0, &MonitorRequest{SID: ch.SID, IOID: 7, Subcmd: pva.SubcmdInit, PVRequest: pvReq}))
		h, p = c.read()
		var mr MonitorReply
		if h.Command != pva.CmdMonitor || mr.Decode(p, h.BigEndian(), &c.types, nil) != nil || mr.Status.Message != "Monitor not implemented for this PV" {
			t.Fatalf("MONITOR INIT on the server PV: %+v %+v", h, mr)
		}
	}
	if r := c.rpc(ch.SID, pva.OpInfo); !r.Status.OK() || r.Value == nil {
		t.Fatalf("RPC after refused operations: %+v", r)
	}
}
