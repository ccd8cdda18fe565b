package pva

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

// The expected bytes below are derived from the captured GET exchange
// (#19, #23), following PVXS's encoders for the other commands:
// GET_FIELD's reply is a GET INIT reply without the sub-command byte
// (serverintrospect.cpp), a MONITOR update is a GET EXEC reply without the
// Status and with an empty overrun BitSet after the value (servermon.cpp).

func withHeader(flags uint8, cmd Command, payload []byte) []byte {
	b := []byte{Magic, 2, flags, byte(cmd), 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(b[4:], uint32(len(payload)))
	return append(b, payload...)
}

func TestGetFieldBytes(t *testing.T) {
	req := AppendGetFieldRequest(nil, 0, &GetFieldRequest{SID: 0x07050301, IOID: 0x10002000})
	want := withHeader(0, CmdGetField, []byte{1, 3, 5, 7, 0, 0x20, 0, 0x10, 0})
	if !bytes.Equal(req, want) {
		t.Fatalf("request\n got %x\nwant %x", req, want)
	}
	var rq GetFieldRequest
	if err := rq.Decode(req[8:], false); err != nil || rq.SID != 0x07050301 || rq.IOID != 0x10002000 || rq.SubField != "" {
		t.Fatalf("%+v %v", rq, err)
	}
	get := onlyMessage(t, 19).Payload // ioid, subcmd 0x08, status, type
	wantReply := withHeader(FlagServer, CmdGetField, append(slices.Clone(get[:4]), get[5:]...))
	got := AppendGetFieldReply(nil, FlagServer, &GetFieldReply{IOID: 0x10002000, Type: NTScalarDoubleType()})
	if !bytes.Equal(got, wantReply) {
		t.Fatalf("reply\n got %x\nwant %x", got, wantReply)
	}
	var r GetFieldReply
	if err := r.Decode(got[8:], false, nil); err != nil || r.Type.Index("value") != 0 || r.Type.ID != NTScalarID {
		t.Fatalf("%+v %v", r, err)
	}
	// An error carries no type.
	e := AppendGetFieldReply(nil, FlagServer, &GetFieldReply{IOID: 1, Status: Status{Type: StatusError, Message: "no"}, Type: NTScalarDoubleType()})
	if err := r.Decode(e[8:], false, nil); err != nil || r.Type != nil || r.Status.OK() {
		t.Fatalf("error reply %+v %v", r, err)
	}
}

func TestMonitorUpdateBytes(t *testing.T) {
	exec := onlyMessage(t, 23).Payload // ioid, subcmd 0, status 0xFF, bitset, value
	want := withHeader(FlagServer, CmdMonitor, append(append(slices.Clone(exec[:5]), exec[6:]...), 0))
	var changed BitSet
	for _, f := range []int{1, 3, 4, 5} {
		changed.Set(f)
	}
	got := AppendMonitorReply(nil, FlagServer, &MonitorReply{IOID: 0x10002000, Changed: changed, Value: NewNTScalarDouble(42)})
	if !bytes.Equal(got, want) {
		t.Fatalf("update\n got %x\nwant %x", got, want)
	}
	typ := NTScalarDoubleType()
	var r MonitorReply
	if err := r.Decode(got[8:], false, nil, typ); err != nil || r.Value.Field("value").Float != 42 || len(r.Overrun) != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	// Only the value changes: the previous alarm message is kept.
	r.Value.Field("alarm.message").Str = "kept"
	var only BitSet
	only.Set(1)
	upd := AppendMonitorReply(nil, FlagServer|FlagBigEndian, &MonitorReply{IOID: 9, Changed: only, Value: NewNTScalarDouble(7)})
	if err := r.Decode(upd[8:], true, nil, typ); err != nil || r.Value.Field("value").Float != 7 || r.Value.Field("alarm.message").Str != "kept" {
		t.Fatalf("partial %+v %v", r.Value, err)
	}
	// INIT and finish.
	ini := AppendMonitorReply(nil, FlagServer, &MonitorReply{IOID: 9, Subcmd: SubcmdInit, Type: typ})
	r = MonitorReply{}
	if err := r.Decode(ini[8:], false, nil, nil); err != nil || !r.IsInit() || r.Type.ID != NTScalarID {
		t.Fatalf("init %+v %v", r, err)
	}
	fin := AppendMonitorReply(nil, FlagServer, &MonitorReply{IOID: 9, Subcmd: SubcmdDestroy})
	if !bytes.Equal(fin, withHeader(FlagServer, CmdMonitor, []byte{9, 0, 0, 0, 0x10, 0xFF})) {
		t.Fatalf("finish %x", fin)
	}
	if err := r.Decode(fin[8:], false, nil, nil); err != nil || !r.IsFinish() {
		t.Fatalf("finish %+v %v", r, err)
	}
}

func TestMonitorRequestForms(t *testing.T) {
	pvReq := NewValue(Struct("", M("field", Struct(""))))
	for _, m := range []MonitorRequest{
		{SID: 1, IOID: 2, Subcmd: SubcmdInit, PVRequest: pvReq},
		{SID: 1, IOID: 2, Subcmd: SubcmdInit | SubcmdMonitorAck, PVRequest: pvReq, Nack: 4},
		{SID: 1, IOID: 2, Subcmd: SubcmdMonitorStart},
		{SID: 1, IOID: 2, Subcmd: SubcmdMonitorAck, Nack: 2},
		{SID: 1, IOID: 2, Subcmd: SubcmdDestroy},
	} {
		for _, fl := range []uint8{0, FlagBigEndian} {
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
	typ := NTScalarDoubleType()
	var only BitSet
	only.Set(1)
	// pvxput sim:x 3: bitset {value}, then just the double.
	b := AppendPutRequest(nil, 0, &PutRequest{SID: 1, IOID: 2, Changed: only, Value: NewNTScalarDouble(3)})
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
	g := AppendPutRequest(nil, FlagBigEndian, &PutRequest{SID: 1, IOID: 2, Subcmd: SubcmdGet})
	if err := rq.Decode(g[8:], true, nil, typ); err != nil || !rq.IsGet() || rq.Value != nil {
		t.Fatalf("get %+v %v", rq, err)
	}
	i := AppendPutRequest(nil, 0, &PutRequest{SID: 1, IOID: 2, Subcmd: SubcmdInit, PVRequest: NewValue(Struct("", M("field", Struct(""))))})
	if err := rq.Decode(i[8:], false, nil, nil); err != nil || !rq.IsInit() || rq.PVRequest.Field("field") == nil {
		t.Fatalf("init %+v %v", rq, err)
	}
	// Replies: INIT has the type (as GET's), put EXEC only a Status, get EXEC the value.
	ir := AppendPutReply(nil, FlagServer, &PutReply{IOID: 0x10002000, Subcmd: SubcmdInit, Type: typ})
	if gi := onlyMessage(t, 19).Raw; !bytes.Equal(ir[8:], gi[8:]) {
		t.Fatalf("put INIT reply differs from GET's\n got %x\nwant %x", ir[8:], gi[8:])
	}
	er := AppendPutReply(nil, FlagServer, &PutReply{IOID: 2, Value: NewNTScalarDouble(1)})
	if !bytes.Equal(er[8:], []byte{2, 0, 0, 0, 0, 0xFF}) {
		t.Fatalf("put exec reply %x", er[8:])
	}
	gr := AppendPutReply(nil, FlagServer, &PutReply{IOID: 2, Subcmd: SubcmdGet, Changed: only, Value: NewNTScalarDouble(5)})
	var r PutReply
	if err := r.Decode(gr[8:], false, nil, typ); err != nil || r.Value.Field("value").Float != 5 {
		t.Fatalf("get reply %+v %v", r, err)
	}
}
