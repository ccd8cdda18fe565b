package sim

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/testutil"
)

// capturedMsg is one message of the repository's capture
// (testdata/captures/loopback.txt).
type capturedMsg struct{ Raw, Payload []byte }

// onlyMessage is block n of the capture, which must hold one whole message.
func onlyMessage(t *testing.T, n int) capturedMsg {
	t.Helper()
	bs := testutil.Capture(t)
	if n < 1 || n > len(bs) || bs[n-1].N != n {
		t.Fatalf("no block #%d", n)
	}
	_, p, rest, err := pva.SplitMessage(bs[n-1].Data)
	if err != nil || len(rest) != 0 {
		t.Fatalf("block #%d is not one message: %v", n, err)
	}
	return capturedMsg{Raw: bs[n-1].Data, Payload: p}
}

func checkErr(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if _, ok := err.(*pva.DecodeError); !ok {
		t.Fatalf("error is %T, not *pva.DecodeError: %v", err, err)
	}
}

// stable checks enc(dec(x)) is a fixed point: decode again and re-encode.
func stable(t *testing.T, enc1 []byte, again func(payload []byte, be bool) ([]byte, error)) {
	t.Helper()
	h, p, rest, err := pva.SplitMessage(enc1)
	if err != nil || len(rest) != 0 {
		t.Fatalf("re-encoding is not one message: %v", err)
	}
	enc2, err := again(p, h.BigEndian())
	if err != nil {
		t.Fatalf("re-encoding does not decode: %v\n%x", err, enc1)
	}
	if !bytes.Equal(enc1, enc2) {
		t.Fatalf("round trip unstable\n1: %x\n2: %x", enc1, enc2)
	}
}

func flagsFor(be bool) uint8 {
	if be {
		return pva.FlagBigEndian
	}
	return 0
}

// The expected bytes below are derived from the captured GET exchange
// (#19, #23), following PVXS's encoders for the other commands:
// GET_FIELD's reply is a GET INIT reply without the sub-command byte
// (serverintrospect.cpp), a MONITOR update is a GET EXEC reply without the
// pva.Status and with an empty overrun pva.BitSet after the value (servermon.cpp).

func withHeader(flags uint8, cmd pva.Command, payload []byte) []byte {
	b := []byte{pva.Magic, 2, flags, byte(cmd), 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(b[4:], uint32(len(payload)))
	return append(b, payload...)
}

func TestGetFieldBytes(t *testing.T) {
	req := AppendGetFieldRequest(nil, 0, &GetFieldRequest{SID: 0x07050301, IOID: 0x10002000})
	want := withHeader(0, pva.CmdGetField, []byte{1, 3, 5, 7, 0, 0x20, 0, 0x10, 0})
	if !bytes.Equal(req, want) {
		t.Fatalf("request\n got %x\nwant %x", req, want)
	}
	var rq GetFieldRequest
	if err := rq.Decode(req[8:], false); err != nil || rq.SID != 0x07050301 || rq.IOID != 0x10002000 || rq.SubField != "" {
		t.Fatalf("%+v %v", rq, err)
	}
	get := onlyMessage(t, 19).Payload // ioid, subcmd 0x08, status, type
	wantReply := withHeader(pva.FlagServer, pva.CmdGetField, append(slices.Clone(get[:4]), get[5:]...))
	got := AppendGetFieldReply(nil, pva.FlagServer, &GetFieldReply{IOID: 0x10002000, Type: pva.NTScalarDoubleType()})
	if !bytes.Equal(got, wantReply) {
		t.Fatalf("reply\n got %x\nwant %x", got, wantReply)
	}
	var r GetFieldReply
	if err := r.Decode(got[8:], false, nil); err != nil || r.Type.Index("value") != 0 || r.Type.ID != pva.NTScalarID {
		t.Fatalf("%+v %v", r, err)
	}
	// An error carries no type.
	e := AppendGetFieldReply(nil, pva.FlagServer, &GetFieldReply{IOID: 1, Status: pva.Status{Type: pva.StatusError, Message: "no"}, Type: pva.NTScalarDoubleType()})
	if err := r.Decode(e[8:], false, nil); err != nil || r.Type != nil || r.Status.OK() {
		t.Fatalf("error reply %+v %v", r, err)
	}
}

func TestMonitorUpdateBytes(t *testing.T) {
	exec := onlyMessage(t, 23).Payload // ioid, subcmd 0, status 0xFF, bitset, value
	want := withHeader(pva.FlagServer, pva.CmdMonitor, append(append(slices.Clone(exec[:5]), exec[6:]...), 0))
	var changed pva.BitSet
	for _, f := range []int{1, 3, 4, 5} {
		changed.Set(f)
	}
	got := AppendMonitorReply(nil, pva.FlagServer, &MonitorReply{IOID: 0x10002000, Changed: changed, Value: pva.NewNTScalarDouble(42)})
	if !bytes.Equal(got, want) {
		t.Fatalf("update\n got %x\nwant %x", got, want)
	}
	typ := pva.NTScalarDoubleType()
	var r MonitorReply
	if err := r.Decode(got[8:], false, nil, typ); err != nil || r.Value.Field("value").Float != 42 || len(r.Overrun) != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	// Only the value changes: the previous alarm message is kept.
	r.Value.Field("alarm.message").Str = "kept"
	var only pva.BitSet
	only.Set(1)
	upd := AppendMonitorReply(nil, pva.FlagServer|pva.FlagBigEndian, &MonitorReply{IOID: 9, Changed: only, Value: pva.NewNTScalarDouble(7)})
	if err := r.Decode(upd[8:], true, nil, typ); err != nil || r.Value.Field("value").Float != 7 || r.Value.Field("alarm.message").Str != "kept" {
		t.Fatalf("partial %+v %v", r.Value, err)
	}
	// INIT and finish.
	ini := AppendMonitorReply(nil, pva.FlagServer, &MonitorReply{IOID: 9, Subcmd: pva.SubcmdInit, Type: typ})
	r = MonitorReply{}
	if err := r.Decode(ini[8:], false, nil, nil); err != nil || !r.IsInit() || r.Type.ID != pva.NTScalarID {
		t.Fatalf("init %+v %v", r, err)
	}
	fin := AppendMonitorReply(nil, pva.FlagServer, &MonitorReply{IOID: 9, Subcmd: pva.SubcmdDestroy})
	if !bytes.Equal(fin, withHeader(pva.FlagServer, pva.CmdMonitor, []byte{9, 0, 0, 0, 0x10, 0xFF})) {
		t.Fatalf("finish %x", fin)
	}
	if err := r.Decode(fin[8:], false, nil, nil); err != nil || !r.IsFinish() {
		t.Fatalf("finish %+v %v", r, err)
	}
}

func TestMonitorRequestForms(t *testing.T) {
	pvReq := pva.NewValue(pva.Struct("", pva.M("field", pva.Struct(""))))
	for _, m := range []MonitorRequest{
		{SID: 1, IOID: 2, Subcmd: pva.SubcmdInit, PVRequest: pvReq},
		{SID: 1, IOID: 2, Subcmd: pva.SubcmdInit | SubcmdMonitorAck, PVRequest: pvReq, Nack: 4},
		{SID: 1, IOID: 2, Subcmd: SubcmdMonitorStart},
		{SID: 1, IOID: 2, Subcmd: SubcmdMonitorAck, Nack: 2},
		{SID: 1, IOID: 2, Subcmd: pva.SubcmdDestroy},
	} {
		for _, fl := range []uint8{0, pva.FlagBigEndian} {
			b := AppendMonitorRequest(nil, fl, &m)
			var got MonitorRequest
			if err := got.Decode(b[8:], fl != 0, nil); err != nil || got.Subcmd != m.Subcmd || got.Nack != m.Nack ||
				(got.PVRequest == nil) != (m.PVRequest == nil) {
				t.Fatalf("%+v -> %+v %v", m, got, err)
			}
			if err := got.Decode(b[8:len(b)-1], fl != 0, nil); err == nil {
				t.Fatalf("%+v: truncated request decoded", m)
			}
		}
	}
	// PVXS client START: sid, ioid, 0x44 (clientmon.cpp).
	if b := AppendMonitorRequest(nil, 0, &MonitorRequest{SID: 1, IOID: 2, Subcmd: SubcmdMonitorStart}); !bytes.Equal(b[8:], []byte{1, 0, 0, 0, 2, 0, 0, 0, 0x44}) {
		t.Fatalf("start %x", b)
	}
}

func TestPutExchange(t *testing.T) {
	typ := pva.NTScalarDoubleType()
	var only pva.BitSet
	only.Set(1)
	// pvxput sim:x 3: bitset {value}, then just the double.
	b := AppendPutRequest(nil, 0, &PutRequest{SID: 1, IOID: 2, Changed: only, Value: pva.NewNTScalarDouble(3)})
	want := []byte{1, 0, 0, 0, 2, 0, 0, 0, 0, 1, 2}
	want = binary.LittleEndian.AppendUint64(want, math.Float64bits(3))
	if !bytes.Equal(b[8:], want) {
		t.Fatalf("put exec\n got %x\nwant %x", b[8:], want)
	}
	var rq PutRequest
	if err := rq.Decode(b[8:], false, nil, typ); err != nil || rq.IsInit() || rq.IsGet() || !rq.Changed.Has(1) || rq.Value.Field("value").Float != 3 {
		t.Fatalf("%+v %v", rq, err)
	}
	if err := rq.Decode(b[8:], false, nil, nil); err == nil {
		t.Fatal("put exec decoded without a type")
	}
	// get-before-put and INIT
	g := AppendPutRequest(nil, pva.FlagBigEndian, &PutRequest{SID: 1, IOID: 2, Subcmd: pva.SubcmdGet})
	if err := rq.Decode(g[8:], true, nil, typ); err != nil || !rq.IsGet() || rq.Value != nil {
		t.Fatalf("get %+v %v", rq, err)
	}
	i := AppendPutRequest(nil, 0, &PutRequest{SID: 1, IOID: 2, Subcmd: pva.SubcmdInit, PVRequest: pva.NewValue(pva.Struct("", pva.M("field", pva.Struct(""))))})
	if err := rq.Decode(i[8:], false, nil, nil); err != nil || !rq.IsInit() || rq.PVRequest.Field("field") == nil {
		t.Fatalf("init %+v %v", rq, err)
	}
	// Replies: INIT has the type (as GET's), put EXEC only a pva.Status, get EXEC the value.
	ir := AppendPutReply(nil, pva.FlagServer, &PutReply{IOID: 0x10002000, Subcmd: pva.SubcmdInit, Type: typ})
	if gi := onlyMessage(t, 19).Raw; !bytes.Equal(ir[8:], gi[8:]) {
		t.Fatalf("put INIT reply differs from GET's\n got %x\nwant %x", ir[8:], gi[8:])
	}
	er := AppendPutReply(nil, pva.FlagServer, &PutReply{IOID: 2, Value: pva.NewNTScalarDouble(1)})
	if !bytes.Equal(er[8:], []byte{2, 0, 0, 0, 0, 0xFF}) {
		t.Fatalf("put exec reply %x", er[8:])
	}
	gr := AppendPutReply(nil, pva.FlagServer, &PutReply{IOID: 2, Subcmd: pva.SubcmdGet, Changed: only, Value: pva.NewNTScalarDouble(5)})
	var r PutReply
	if err := r.Decode(gr[8:], false, nil, typ); err != nil || r.Value.Field("value").Float != 5 {
		t.Fatalf("get reply %+v %v", r, err)
	}
}

// FuzzIOCOps covers the operations the simulator serves besides GET and
// RPC: GET_FIELD, PUT and MONITOR, both directions (cmd picks which).
func FuzzIOCOps(f *testing.F) {
	typ := pva.NTScalarDoubleType()
	var only pva.BitSet
	only.Set(1)
	pvReq := pva.NewValue(pva.Struct("", pva.M("field", pva.Struct(""))))
	for _, b := range [][]byte{
		AppendGetFieldRequest(nil, 0, &GetFieldRequest{SID: 1, IOID: 2}),
		AppendGetFieldReply(nil, pva.FlagServer, &GetFieldReply{IOID: 2, Type: typ}),
		AppendPutRequest(nil, 0, &PutRequest{SID: 1, IOID: 2, Subcmd: pva.SubcmdInit, PVRequest: pvReq}),
		AppendPutRequest(nil, 0, &PutRequest{SID: 1, IOID: 2, Changed: only, Value: pva.NewNTScalarDouble(3)}),
		AppendPutReply(nil, pva.FlagServer, &PutReply{IOID: 2, Subcmd: pva.SubcmdGet, Changed: only, Value: pva.NewNTScalarDouble(3)}),
		AppendMonitorRequest(nil, 0, &MonitorRequest{SID: 1, IOID: 2, Subcmd: pva.SubcmdInit | SubcmdMonitorAck, PVRequest: pvReq, Nack: 4}),
		AppendMonitorReply(nil, pva.FlagServer, &MonitorReply{IOID: 2, Changed: only, Value: pva.NewNTScalarDouble(3)}),
		AppendMonitorReply(nil, pva.FlagServer, &MonitorReply{IOID: 2, Subcmd: pva.SubcmdInit, Type: typ}),
	} {
		h, p, _, _ := pva.SplitMessage(b)
		f.Add(p, false, uint8(h.Command), h.FromServer())
	}
	f.Fuzz(func(t *testing.T, payload []byte, be bool, cmd uint8, fromServer bool) {
		fl := flagsFor(be)
		var dec func(p []byte, be bool) ([]byte, error)
		switch c := pva.Command(cmd % 3); {
		case c == 0 && fromServer:
			dec = func(p []byte, be bool) ([]byte, error) {
				var m GetFieldReply
				err := m.Decode(p, be, &pva.TypeCache{})
				return AppendGetFieldReply(nil, fl|pva.FlagServer, &m), err
			}
		case c == 0:
			dec = func(p []byte, be bool) ([]byte, error) {
				var m GetFieldRequest
				err := m.Decode(p, be)
				return AppendGetFieldRequest(nil, fl, &m), err
			}
		case c == 1 && fromServer:
			dec = func(p []byte, be bool) ([]byte, error) {
				var m PutReply
				err := m.Decode(p, be, &pva.TypeCache{}, typ)
				return AppendPutReply(nil, fl|pva.FlagServer, &m), err
			}
		case c == 1:
			dec = func(p []byte, be bool) ([]byte, error) {
				var m PutRequest
				err := m.Decode(p, be, &pva.TypeCache{}, typ)
				return AppendPutRequest(nil, fl, &m), err
			}
		case fromServer:
			dec = func(p []byte, be bool) ([]byte, error) {
				var m MonitorReply
				err := m.Decode(p, be, &pva.TypeCache{}, typ)
				return AppendMonitorReply(nil, fl|pva.FlagServer, &m), err
			}
		default:
			dec = func(p []byte, be bool) ([]byte, error) {
				var m MonitorRequest
				err := m.Decode(p, be, &pva.TypeCache{})
				return AppendMonitorRequest(nil, fl, &m), err
			}
		}
		enc, err := dec(payload, be)
		checkErr(t, err)
		if err == nil {
			stable(t, enc, dec)
		}
	})
}
