package pva

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// everyType is a structure using every descriptor kind.
func everyType() *FieldDesc {
	var ms []Member
	for _, c := range []TypeCode{TypeBool, TypeInt8, TypeInt16, TypeInt32, TypeInt64, TypeUInt8, TypeUInt16,
		TypeUInt32, TypeUInt64, TypeFloat32, TypeFloat64, TypeString} {
		ms = append(ms, M(c.String(), Scalar(c)), M(c.String()+"[]", Scalar(c|TypeArray)))
	}
	u := &FieldDesc{Code: TypeUnion, ID: "u_t", Members: []Member{M("i", Scalar(TypeInt32)), M("s", Scalar(TypeString))}}
	elem := Struct("e_t", M("x", Scalar(TypeFloat64)))
	ms = append(ms, M("u", u), M("any", &FieldDesc{Code: TypeAny}),
		M("sa", &FieldDesc{Code: TypeStructArray, Elem: elem}), M("ua", &FieldDesc{Code: TypeUnionArray, Elem: u}),
		M("aa", &FieldDesc{Code: TypeAnyArray}), M("nested", Struct("n_t", M("deep", Struct("", M("v", Scalar(TypeInt16)))))))
	return Struct("every_t", ms...)
}

func everyValue() *Value {
	t := everyType()
	v := NewValue(t)
	set := func(name string, f func(*Value)) { f(v.Field(name)) }
	set("bool", func(x *Value) { x.Int = 1 })
	set("int8", func(x *Value) { x.Int = -5 })
	set("int16", func(x *Value) { x.Int = -300 })
	set("int32", func(x *Value) { x.Int = -70000 })
	set("int64", func(x *Value) { x.Int = math.MinInt64 })
	set("uint8", func(x *Value) { x.Uint = 200 })
	set("uint16", func(x *Value) { x.Uint = 60000 })
	set("uint32", func(x *Value) { x.Uint = 4e9 })
	set("uint64", func(x *Value) { x.Uint = math.MaxUint64 })
	set("float", func(x *Value) { x.Float = 1.5 })
	set("double", func(x *Value) { x.Float = -2.25e100 })
	set("string", func(x *Value) { x.Str = strings.Repeat("s", 300) }) // long Size form
	set("bool[]", func(x *Value) { x.Bools = []bool{true, false, true} })
	set("int8[]", func(x *Value) { x.Ints = []int64{-1, 2} })
	set("int16[]", func(x *Value) { x.Ints = []int64{-1000} })
	set("int32[]", func(x *Value) { x.Ints = []int64{1, 2, 3} })
	set("int64[]", func(x *Value) { x.Ints = []int64{math.MaxInt64} })
	set("uint8[]", func(x *Value) { x.Uints = []uint64{255} })
	set("uint16[]", func(x *Value) { x.Uints = []uint64{1, 65535} })
	set("uint32[]", func(x *Value) { x.Uints = []uint64{7} })
	set("uint64[]", func(x *Value) { x.Uints = []uint64{1 << 63} })
	set("float[]", func(x *Value) { x.Floats = []float64{0.5} })
	set("double[]", func(x *Value) { x.Floats = []float64{1, 2} })
	set("string[]", func(x *Value) { x.Strs = []string{"a", "", "ccc"} })
	u := v.Field("u")
	u.Selector, u.Fields = 1, []*Value{{Type: u.Type.Members[1].Type, Str: "sel", Selector: -1}}
	a := v.Field("any")
	a.Fields = []*Value{{Type: Scalar(TypeInt32), Int: 42, Selector: -1}}
	sa := v.Field("sa")
	e := NewValue(sa.Type.Elem)
	e.Fields[0].Float = 3
	sa.Elems = []*Value{e, nil, NewValue(sa.Type.Elem)}
	ua := v.Field("ua")
	ue := NewValue(ua.Type.Elem)
	ue.Selector, ue.Fields = 0, []*Value{{Type: ua.Type.Elem.Members[0].Type, Int: -9, Selector: -1}}
	ua.Elems = []*Value{ue, NewValue(ua.Type.Elem)}
	v.Field("aa").Elems = []*Value{nil, {Type: Scalar(TypeString), Str: "in any[]", Selector: -1}}
	v.Field("nested.deep.v").Int = 12
	return v
}

func encodeTV(be bool, v *Value) []byte {
	w := Writer{BE: be}
	AppendTypeValue(&w, v)
	return w.B
}

func TestValueRoundTripBothOrders(t *testing.T) {
	v := everyValue()
	for _, be := range []bool{false, true} {
		b := encodeTV(be, v)
		got, err := DecodeTypeValue(b, be, "test", nil)
		if err != nil {
			t.Fatalf("be=%v: %v", be, err)
		}
		if !bytes.Equal(encodeTV(be, got), b) {
			t.Fatalf("be=%v: re-encoding differs", be)
		}
		for _, name := range []string{"int64", "uint64", "double", "string", "int32[]", "string[]", "nested.deep.v"} {
			if a, b := got.Field(name), v.Field(name); a.Int != b.Int || a.Uint != b.Uint || a.Float != b.Float ||
				a.Str != b.Str || !slices.Equal(a.Ints, b.Ints) || !slices.Equal(a.Strs, b.Strs) {
				t.Errorf("be=%v %s: got %+v want %+v", be, name, a, b)
			}
		}
		if got.Field("u").Selector != 1 || got.Field("u").Fields[0].Str != "sel" ||
			got.Field("any").Fields[0].Int != 42 || got.Field("sa").Elems[1] != nil ||
			got.Field("sa").Elems[0].Field("x").Float != 3 || got.Field("aa").Elems[1].Str != "in any[]" {
			t.Errorf("be=%v: containers %+v", be, got)
		}
		// the other byte order gives other bytes for the same value
		if be && bytes.Equal(b, encodeTV(false, v)) {
			t.Error("byte order ignored")
		}
	}
	if n := everyType().NumBits(); n != 1+24+5+3 { // top, scalars+arrays, u/any/sa/ua/aa, nested.deep.v
		t.Fatalf("NumBits %d", n)
	}
}

func TestTypeCacheForms(t *testing.T) {
	// define key 7 (LE) as struct{ s string }, then reuse it twice
	def := []byte{0xFD, 7, 0, 0x80, 0, 1, 1, 's', 0x60}
	use := []byte{0xFE, 7, 0}
	b := append([]byte{0x80, 0, 2, 1, 'a'}, def...)
	b = append(append(b, 1, 'b'), use...)
	b = append(b, 2, 'h', 'i', 2, 'y', 'o') // values of a.s, b.s
	tc := &TypeCache{}
	v, err := DecodeTypeValue(b, false, "test", tc)
	if err != nil {
		t.Fatal(err)
	}
	if v.Field("a.s").Str != "hi" || v.Field("b.s").Str != "yo" || tc.Len() != 1 || v.Type.Members[0].Type != v.Type.Members[1].Type {
		t.Fatalf("%+v", v)
	}
	// a later message may reuse the key on its own (top level)
	v, err = DecodeTypeValue([]byte{0xFE, 7, 0, 1, 'z'}, false, "test", tc)
	if err != nil || v.Field("s").Str != "z" {
		t.Fatalf("%+v %v", v, err)
	}
	// big endian key
	tcBE := &TypeCache{}
	if _, err := DecodeTypeValue([]byte{0xFD, 0, 7, 0x60, 0}, true, "test", tcBE); err != nil {
		t.Fatal(err)
	}
	if d, ok := tcBE.Get(7); !ok || d.Code != TypeString {
		t.Fatal("BE key not stored as 7")
	}
	// unknown key, nil cache, null type in a definition
	for _, bad := range [][]byte{{0xFE, 8, 0}, {0xFD, 1, 0, 0xFF}, {0x80, 0, 1, 1, 'x', 0xFF}} {
		_, err := DecodeTypeValue(bad, false, "test", tc)
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%x: %v", bad, err)
		}
	}
	if _, err := DecodeTypeValue(use, false, "test", nil); err == nil {
		t.Error("0xFE without a cache accepted")
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"bounded array":      {0x30},
		"fixed array":        {0x38},
		"unknown code":       {0x44},
		"struct[] of scalar": {0x88, 0x22},
		"huge member count":  {0x80, 0, 0xFE, 0xFF, 0xFF, 0xFF, 0x7F},
		"size > 2^31":        {0x60, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF},
		"huge array count":   {0x2A, 0xFE, 0x00, 0x00, 0x00, 0x10, 1, 2, 3, 4},
		"huge string[]":      {0x68, 0xFE, 0x00, 0x00, 0x10, 0x00},
		"huge struct[]":      {0x88, 0x80, 0, 0, 0xFE, 0x00, 0x00, 0x10, 0x00, 1},
		"union selector":     {0x81, 0, 1, 1, 'a', 0x22, 5, 0, 0, 0, 0},
		"trailing bytes":     {0x22, 1, 2, 3, 4, 5},
		"null size":          {0x2A, 0xFF},
		"short int64":        {0x23, 1, 2, 3},
	} {
		_, err := DecodeTypeValue(b, false, "test", &TypeCache{})
		var de *DecodeError
		if !errors.As(err, &de) || de.Msg != "test" || de.Field == "" {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDecodeLimits(t *testing.T) {
	// nesting: struct{ s: struct{ s: ... } } deeper than MaxDepth
	var b []byte
	for i := 0; i < MaxDepth+5; i++ {
		b = append(b, 0x80, 0, 1, 1, 's')
	}
	b = append(b, 0x80, 0, 0)
	if _, err := DecodeTypeValue(b, false, "test", nil); err == nil || !strings.Contains(err.Error(), "deeper") {
		t.Fatalf("deep type: %v", err)
	}
	// exponential expansion through the cache: key k = struct of 8 members
	// of key k-1. Six levels are 8^6 fields from ~100 bytes.
	tc := &TypeCache{}
	b = []byte{0x80, 0, 7, 1, 'k', 0xFD, 0, 0, 0x80, 0, 0}
	for k := 1; k <= 6; k++ {
		b = append(b, 1, 'k', 0xFD, byte(k), 0, 0x80, 0, 8)
		for i := 0; i < 8; i++ {
			b = append(b, 1, 'a'+byte(i), 0xFE, byte(k-1), 0)
		}
	}
	_, err := DecodeTypeValue(b, false, "test", tc)
	if err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("exponential type: %v", err)
	}
	// struct[] of empty structures: elements cost one byte each, so the
	// array is bounded by the payload, but a wide cached element is not
	wide := []byte{0xFD, 1, 0, 0x80, 0, 200}
	for i := 0; i < 200; i++ {
		wide = append(wide, 1, byte(i), 0x80, 0, 0)
	}
	tc = &TypeCache{}
	if _, err := DecodeTypeValue(wide, false, "test", tc); err != nil {
		t.Fatal(err)
	}
	arr := []byte{0x88, 0xFE, 1, 0, 0xFE, 0, 1, 0, 0} // 256 elements
	for i := 0; i < 256; i++ {
		arr = append(arr, 1)
	}
	if _, err := DecodeTypeValue(arr, false, "test", tc); err == nil || !strings.Contains(err.Error(), "nodes") {
		t.Fatalf("node budget: %v", err)
	}
}

func TestBitSet(t *testing.T) {
	for _, bits := range [][]int{nil, {0}, {1, 3, 4, 5}, {7}, {8}, {63}, {64}, {0, 70, 130}} {
		var bs BitSet
		for _, i := range bits {
			bs.Set(i)
		}
		for _, be := range []bool{false, true} {
			w := Writer{BE: be}
			AppendBitSet(&w, bs)
			r := NewReader(w.B, be, "test")
			got := ReadBitSet(&r, "bs", nil)
			if r.Err() != nil || r.Remaining() != 0 {
				t.Fatalf("%v: %v", bits, r.Err())
			}
			for i := 0; i < 200; i++ {
				if got.Has(i) != slices.Contains(bits, i) {
					t.Fatalf("%v be=%v: bit %d wrong in %x", bits, be, i, w.B)
				}
			}
			hi := -1
			for _, i := range bits {
				hi = max(hi, i)
			}
			if want := (hi + 8) / 8; int(w.B[0]) != want { // trailing zero bytes omitted
				t.Fatalf("%v: size byte %d want %d", bits, w.B[0], want)
			}
		}
	}
	r := NewReader([]byte{9, 1, 2}, false, "test")
	if ReadBitSet(&r, "bs", nil); r.Err() == nil {
		t.Fatal("oversized bitset accepted")
	}
}

func TestPartialValue(t *testing.T) {
	src := NewNTScalarDouble(3.5)
	src.Field("alarm.message").Str = "HIHI"
	src.Field("timeStamp.userTag").Int = 9
	var changed BitSet
	changed.Set(1) // value
	changed.Set(2) // alarm (whole)
	w := Writer{}
	AppendPartialValue(&w, src, changed)
	dst := NewNTScalarDouble(0)
	dst.Field("timeStamp.nanoseconds").Int = 77
	r := NewReader(w.B, false, "test")
	ReadPartialValue(&r, "v", dst, changed, nil)
	if r.Err() != nil || r.Remaining() != 0 {
		t.Fatal(r.Err())
	}
	if dst.Field("value").Float != 3.5 || dst.Field("alarm.message").Str != "HIHI" ||
		dst.Field("timeStamp.userTag").Int != 0 || dst.Field("timeStamp.nanoseconds").Int != 77 {
		t.Fatalf("partial: %+v", dst)
	}
	if len(w.B) != 8+4+4+1+4 {
		t.Fatalf("partial wrote %d bytes", len(w.B))
	}
}

func TestNTURIOpForms(t *testing.T) {
	cpp := Struct(NTURIID, M("scheme", Scalar(TypeString)), M("path", Scalar(TypeString)),
		M("query", Struct("", M("op", Scalar(TypeString)))))
	v := NewValue(cpp)
	v.Field("scheme").Str, v.Field("path").Str, v.Field("query.op").Str = "pva", "server", "info"
	if p, op, err := NTURIOp(v); err != nil || p != "server" || op != "info" {
		t.Fatalf("cpp form: %q %q %v", p, op, err)
	}
	bare := NewValue(Struct("", M("op", Scalar(TypeString))))
	bare.Fields[0].Str = "channels"
	if _, op, err := NTURIOp(bare); err != nil || op != "channels" {
		t.Fatalf("bare: %q %v", op, err)
	}
	for _, bad := range []*Value{nil, NewValue(Scalar(TypeString)), NewValue(Struct("", M("query", Struct("")))),
		NewValue(Struct("", M("op", Scalar(TypeInt32))))} {
		if _, _, err := NTURIOp(bad); !errors.Is(err, ErrNoOp) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if _, err := ChannelListNames(NewServerInfo("a", "b")); !errors.Is(err, ErrNoStringArray) {
		t.Fatal(err)
	}
	cppList := NewValue(Struct(NTScalarArrayID, M("value", Scalar(TypeString|TypeArray))))
	cppList.Fields[0].Strs = []string{"x"}
	if n, err := ChannelListNames(cppList); err != nil || !reflect.DeepEqual(n, []string{"x"}) {
		t.Fatal(n, err)
	}
}

// With the cache forms, a few bytes can name a type whose plain form is
// exponentially large (each union reuses the previous one twice). Decoding
// must refuse it, or re-encoding and walking it would never finish.
func TestCachedTypeExpansionBounded(t *testing.T) {
	w := Writer{BE: true}
	// key 1: union{a: int32, b: int32}
	w.B = append(w.B, 0xFD, 0, 1, 0x81, 0, 2, 1, 'a', 0x22, 1, 'b', 0x22)
	for k := 2; k <= 30; k++ {
		// key k: union{a: <k-1>, b: <k-1>}
		w.B = append(w.B, 0xFD, 0, byte(k), 0x81, 0, 2, 1, 'a', 0xFE, 0, byte(k-1), 1, 'b', 0xFE, 0, byte(k-1))
	}
	var tc TypeCache
	r := NewReader(w.B, true, "test")
	var last *FieldDesc
	for !r.Failed() && r.Remaining() > 0 {
		last = ReadFieldDesc(&r, "type", &tc)
	}
	if r.Err() == nil {
		t.Fatalf("a type of 2^30 nodes was accepted (%d bytes): %v", len(w.B), last != nil)
	}
	if !strings.Contains(r.Err().Error(), "nodes") {
		t.Fatalf("error %v does not say why", r.Err())
	}
}
