package pva

import "errors"

// Normative type IDs used by the `server` PV RPC and the simulator's GET.
const (
	NTURIID         = "epics:nt/NTURI:1.0"
	NTScalarArrayID = "epics:nt/NTScalarArray:1.0"
	NTScalarID      = "epics:nt/NTScalar:1.0"
)

// Server RPC operations (query.op).
const (
	OpChannels = "channels"
	OpInfo     = "info"
)

// alarmType and timeStampType are the alarm_t and time_t structures PVXS
// puts in its normative types.
func alarmType() *FieldDesc {
	return Struct("alarm_t", M("severity", Scalar(TypeInt32)), M("status", Scalar(TypeInt32)),
		M("message", Scalar(TypeString)))
}

func timeStampType() *FieldDesc {
	return Struct("time_t", M("secondsPastEpoch", Scalar(TypeInt64)), M("nanoseconds", Scalar(TypeInt32)),
		M("userTag", Scalar(TypeInt32)))
}

// NewNTURI builds the argument pvxlist sends (tools/list.cpp uriArgs):
// NTURI{scheme "", authority "", path, query{op}}; its type + value
// encoding is byte-for-byte PVXS's.
func NewNTURI(path, op string) *Value {
	t := Struct(NTURIID, M("scheme", Scalar(TypeString)), M("authority", Scalar(TypeString)),
		M("path", Scalar(TypeString)), M("query", Struct("", M("op", Scalar(TypeString)))))
	v := NewValue(t)
	v.Field("path").Str = path
	v.Field("query.op").Str = op
	return v
}

// ErrNoOp is returned by NTURIOp when the argument names no operation.
var ErrNoOp = errors.New("pva: RPC argument has no string query.op")

// NTURIOp finds the requested operation in an RPC argument the way the
// PVXS server does: `query.op` if the top has a `query` member, else a
// top-level `op`. It accepts PVXS's NTURI, pvAccessCPP's (no authority,
// scheme "pva") or a bare structure; members are found by name, not
// position. path is "" when absent.
func NTURIOp(v *Value) (path, op string, err error) {
	if v == nil || v.Type == nil || v.Type.Code != TypeStruct {
		return "", "", ErrNoOp
	}
	if p := v.Field("path"); p != nil && p.Type.Code == TypeString {
		path = p.Str
	}
	q := v
	if f := v.Field("query"); f != nil && f.Type.Code == TypeStruct {
		q = f
	}
	o := q.Field("op")
	if o == nil || o.Type.Code != TypeString {
		return path, "", ErrNoOp
	}
	return path, o.Str, nil
}

// NewChannelList builds PVXS's reply to op=channels: NTScalarArray with a
// string[] value plus zero alarm and timeStamp (docs/protocol.md, "The
// listing RPC").
func NewChannelList(names []string) *Value {
	t := Struct(NTScalarArrayID, M("value", Scalar(TypeString|TypeArray)), M("alarm", alarmType()),
		M("timeStamp", timeStampType()))
	v := NewValue(t)
	v.Fields[0].Strs = names
	return v
}

// ErrNoStringArray is returned by ChannelListNames for a reply without a
// string[] `value`.
var ErrNoStringArray = errors.New("pva: RPC result has no string[] value")

// ChannelListNames returns the `value` string[] of an op=channels reply in
// either PVXS's full form or pvAccessCPP's value-only form (both tools read
// only `value`).
func ChannelListNames(v *Value) ([]string, error) {
	f := v.Field("value")
	if f == nil || f.Type.Code != TypeString|TypeArray {
		return nil, ErrNoStringArray
	}
	return f.Strs, nil
}

// NewServerInfo builds PVXS's reply to op=info: a structure with no ID
// and string members implLang and version.
func NewServerInfo(implLang, version string) *Value {
	v := NewValue(Struct("", M("implLang", Scalar(TypeString)), M("version", Scalar(TypeString))))
	v.Fields[0].Str = implLang
	v.Fields[1].Str = version
	return v
}

// NTScalarDoubleType is the type PVXS serves for a double PV (capture
// #19): NTScalar{double value, alarm_t alarm, time_t timeStamp}.
func NTScalarDoubleType() *FieldDesc {
	return Struct(NTScalarID, M("value", Scalar(TypeFloat64)), M("alarm", alarmType()),
		M("timeStamp", timeStampType()))
}

// NewNTScalarDouble returns an NTScalar double holding x, alarm and time
// zero.
func NewNTScalarDouble(x float64) *Value {
	v := NewValue(NTScalarDoubleType())
	v.Fields[0].Float = x
	return v
}
