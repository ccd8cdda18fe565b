package pva

import (
	"math"
	"strconv"
)

// TypeCode is a pvData type code (docs/protocol.md, "pvData types and
// values"). Scalar array codes are the scalar code | 0x08.
type TypeCode uint8

// Type codes.
const (
	TypeBool        TypeCode = 0x00
	TypeInt8        TypeCode = 0x20
	TypeInt16       TypeCode = 0x21
	TypeInt32       TypeCode = 0x22
	TypeInt64       TypeCode = 0x23
	TypeUInt8       TypeCode = 0x24
	TypeUInt16      TypeCode = 0x25
	TypeUInt32      TypeCode = 0x26
	TypeUInt64      TypeCode = 0x27
	TypeFloat32     TypeCode = 0x42
	TypeFloat64     TypeCode = 0x43
	TypeString      TypeCode = 0x60
	TypeStruct      TypeCode = 0x80
	TypeUnion       TypeCode = 0x81
	TypeAny         TypeCode = 0x82
	TypeStructArray TypeCode = 0x88
	TypeUnionArray  TypeCode = 0x89
	TypeAnyArray    TypeCode = 0x8A
	// TypeArray is or'ed into a scalar code to make its array code.
	TypeArray TypeCode = 0x08

	typeNull     = 0xFF // "no type": type+value with nothing following
	typeCacheDef = 0xFD // u16 key, then the descriptor: define and use
	typeCacheUse = 0xFE // u16 key: reuse a defined descriptor
)

// Decoding limits. A peer controls every length on the wire, so nesting and
// the number of value nodes one message may produce are capped: with the
// 0xFE cache form a few bytes can name a descriptor of any size, and empty
// structures take no value bytes, so input length alone bounds nothing.
const (
	MaxDepth      = 32      // nesting of descriptors and values
	MaxValueNodes = 1 << 14 // Values one ReadValue / ReadTypeValue call may create
)

// IsScalar reports a scalar (non-array) code: bool, ints, floats, string.
func (c TypeCode) IsScalar() bool {
	switch c {
	case TypeBool, TypeInt8, TypeInt16, TypeInt32, TypeInt64, TypeUInt8, TypeUInt16, TypeUInt32,
		TypeUInt64, TypeFloat32, TypeFloat64, TypeString:
		return true
	}
	return false
}

// IsScalarArray reports a scalar array code (bool[] .. string[]).
func (c TypeCode) IsScalarArray() bool { return c&TypeArray != 0 && (c &^ TypeArray).IsScalar() }

// Elem is the element code of a scalar array code.
func (c TypeCode) Elem() TypeCode { return c &^ TypeArray }

// scalarSize is the fixed wire width of a numeric scalar; 0 for string.
func (c TypeCode) scalarSize() int {
	switch c {
	case TypeBool, TypeInt8, TypeUInt8:
		return 1
	case TypeInt16, TypeUInt16:
		return 2
	case TypeInt32, TypeUInt32, TypeFloat32:
		return 4
	case TypeInt64, TypeUInt64, TypeFloat64:
		return 8
	}
	return 0
}

func (c TypeCode) signed() bool { return c >= TypeInt8 && c <= TypeInt64 }

func (c TypeCode) String() string {
	names := map[TypeCode]string{TypeBool: "bool", TypeInt8: "int8", TypeInt16: "int16", TypeInt32: "int32",
		TypeInt64: "int64", TypeUInt8: "uint8", TypeUInt16: "uint16", TypeUInt32: "uint32", TypeUInt64: "uint64",
		TypeFloat32: "float", TypeFloat64: "double", TypeString: "string", TypeStruct: "struct",
		TypeUnion: "union", TypeAny: "any", TypeStructArray: "struct[]", TypeUnionArray: "union[]",
		TypeAnyArray: "any[]"}
	if n, ok := names[c]; ok {
		return n
	}
	if c.IsScalarArray() {
		return names[c.Elem()] + "[]"
	}
	return "type(0x" + strconv.FormatUint(uint64(c), 16) + ")"
}

// Member is one named member of a structure or union descriptor.
type Member struct {
	Name string
	Type *FieldDesc
}

// FieldDesc is a pvData type descriptor. Decoded descriptors may be shared
// (the type cache hands out the same pointer for every 0xFE reuse), so treat
// them as immutable.
type FieldDesc struct {
	Code    TypeCode
	ID      string     // struct and union only
	Members []Member   // struct and union only
	Elem    *FieldDesc // struct[] and union[]: the struct or union element type
	bits    int        // NumBits, set when decoded (bounded by MaxValueNodes)
	nodes   int        // expanded descriptor size, set when decoded (bounded by MaxValueNodes)
	size    int        // expanded size in bytes (estimate), set when decoded
}

// Estimated memory of one descriptor and of one member entry, for the
// expanded size (descSize) that bounds a TypeCache.
const (
	descOverhead   = 96
	memberOverhead = 24
)

// descSize is the memory d would take written out in plain form: every
// descriptor, member entry, name and ID, shared ones counted each time they
// are used (so it bounds what any walk of the type can cost, too).
func descSize(d *FieldDesc) int {
	if d == nil {
		return 0
	}
	if d.size > 0 {
		return d.size
	}
	n := descOverhead + len(d.ID)
	for _, m := range d.Members {
		n += memberOverhead + len(m.Name) + descSize(m.Type)
	}
	if d.Elem != nil {
		n += descSize(d.Elem)
	}
	return n
}

// descNodes is the size of d written out in plain form, in descriptors.
// Decoding bounds it: with the cache forms, a few bytes can describe a
// type whose plain form (what AppendFieldDesc writes, what every walk of
// the type visits) is exponentially large.
func descNodes(d *FieldDesc) int {
	if d == nil {
		return 1
	}
	if d.nodes > 0 {
		return d.nodes
	}
	n := 1
	for _, m := range d.Members {
		n += descNodes(m.Type)
	}
	if d.Elem != nil {
		n += descNodes(d.Elem)
	}
	return n
}

// Scalar returns the descriptor of a scalar or scalar array code.
func Scalar(c TypeCode) *FieldDesc { return &FieldDesc{Code: c} }

// Struct returns a structure descriptor.
func Struct(id string, members ...Member) *FieldDesc {
	return &FieldDesc{Code: TypeStruct, ID: id, Members: members}
}

// M is shorthand for a Member.
func M(name string, t *FieldDesc) Member { return Member{Name: name, Type: t} }

// Index returns the member index of name, or -1.
func (d *FieldDesc) Index(name string) int {
	for i := range d.Members {
		if d.Members[i].Name == name {
			return i
		}
	}
	return -1
}

// TypeCache is the receiver's table for the 0xFD/0xFE descriptor cache
// forms. Keys are per TCP connection and per direction, so a connection
// keeps one TypeCache for what it receives and feeds every message of that
// direction through it in order. The zero value is ready; nil means "no
// cache" (0xFD still decodes, 0xFE fails). Not safe for concurrent use.
//
// The wire lets a peer define 65,536 keys, each up to MaxValueNodes
// descriptors when expanded, so a long-lived cache is bounded: a
// definition that would exceed MaxEntries or MaxBytes (the expanded size
// of every entry, names included), or that Admit refuses, fails the
// decode with "type cache full" and is not stored.
type TypeCache struct {
	m       map[uint16]*FieldDesc
	bytes   int
	refused int

	MaxEntries int // 0 = no bound
	MaxBytes   int // 0 = no bound
	// Admit, if set, is asked before a definition grows the cache by n
	// bytes (n < 0 when a redefinition shrinks it); it may apply a bound
	// shared by many caches. A refusal fails the decode.
	Admit func(n int) bool
}

// Len is the number of cached descriptors.
func (c *TypeCache) Len() int { return len(c.m) }

// Bytes is the expanded size of every cached descriptor together.
func (c *TypeCache) Bytes() int { return c.bytes }

// Refused counts the definitions a bound refused.
func (c *TypeCache) Refused() int { return c.refused }

// Get returns the descriptor stored under key.
func (c *TypeCache) Get(key uint16) (*FieldDesc, bool) {
	d, ok := c.m[key]
	return d, ok
}

// room reports whether a definition of key could be stored at all (the
// entry bound; the byte bound needs the decoded size).
func (c *TypeCache) room(key uint16) bool {
	if c.MaxEntries <= 0 || len(c.m) < c.MaxEntries {
		return true
	}
	_, redefined := c.m[key]
	return redefined
}

// put stores d under key, unless a bound refuses it.
func (c *TypeCache) put(key uint16, d *FieldDesc) bool {
	grow := descSize(d)
	old, redefined := c.m[key]
	if redefined {
		grow -= descSize(old)
	}
	if c.MaxEntries > 0 && !redefined && len(c.m) >= c.MaxEntries ||
		c.MaxBytes > 0 && c.bytes+grow > c.MaxBytes ||
		c.Admit != nil && !c.Admit(grow) {
		c.refused++
		return false
	}
	if c.m == nil {
		c.m = make(map[uint16]*FieldDesc)
	}
	c.m[key] = d
	c.bytes += grow
	return true
}

// ReadFieldDesc reads a descriptor, resolving cache forms through tc. The
// null type 0xFF yields nil (no error); callers for which null is invalid
// must check.
func ReadFieldDesc(r *Reader, field string, tc *TypeCache) *FieldDesc {
	return readDesc(r, field, tc, 0)
}

func readDesc(r *Reader, field string, tc *TypeCache, depth int) *FieldDesc {
	if depth > MaxDepth {
		r.Fail(field, "type nesting deeper than "+strconv.Itoa(MaxDepth))
		return nil
	}
	code := r.U8(field)
	if r.Failed() {
		return nil
	}
	switch code {
	case typeNull:
		return nil
	case typeCacheDef:
		key := r.U16(field)
		if tc != nil && !tc.room(key) {
			// Refused whatever it describes: do not spend the decode on it.
			tc.refused++
			r.Fail(field, "type cache full: key "+strconv.Itoa(int(key))+" not stored")
			return nil
		}
		d := readDesc(r, field, tc, depth+1)
		if r.Failed() {
			return nil
		}
		if d == nil {
			r.Fail(field, "null type in cache definition")
			return nil
		}
		if tc != nil && !tc.put(key, d) {
			r.Fail(field, "type cache full: key "+strconv.Itoa(int(key))+" not stored")
			return nil
		}
		return d
	case typeCacheUse:
		key := r.U16(field)
		if r.Failed() {
			return nil
		}
		var d *FieldDesc
		ok := false
		if tc != nil {
			d, ok = tc.Get(key)
		}
		if !ok {
			r.Fail(field, "unknown type cache key "+strconv.Itoa(int(key)))
			return nil
		}
		return d
	}
	c := TypeCode(code)
	switch {
	case c.IsScalar(), c.IsScalarArray():
		return &FieldDesc{Code: c, nodes: 1, size: descOverhead}
	case c == TypeAny, c == TypeAnyArray:
		return &FieldDesc{Code: c, nodes: 1, size: descOverhead}
	case c == TypeStruct, c == TypeUnion:
		d := &FieldDesc{Code: c, ID: r.String(field)}
		n := r.Size(field)
		// a member costs at least a 1-byte name and a 1-byte type
		if !r.Failed() && n*2 > r.Remaining() {
			r.Fail(field+".members", "member count "+strconv.Itoa(n)+" exceeds payload")
		}
		if r.Failed() {
			return nil
		}
		d.Members = make([]Member, 0, n)
		for i := 0; i < n && !r.Failed(); i++ {
			name := r.String(field)
			t := readDesc(r, name, tc, depth+1)
			if !r.Failed() && t == nil {
				r.Fail(field+"."+name, "null member type")
			}
			d.Members = append(d.Members, Member{Name: name, Type: t})
		}
		if r.Failed() {
			return nil
		}
		// Cached descriptors can be reused as members of others, so the
		// expanded size can grow exponentially with few bytes; everything
		// that walks a structure's fields (NewValue, BitSet offsets) relies
		// on this bound.
		d.nodes = 1
		for _, m := range d.Members {
			d.nodes += descNodes(m.Type)
			if d.nodes > MaxValueNodes {
				r.Fail(field, "type has more than "+strconv.Itoa(MaxValueNodes)+" nodes when expanded")
				return nil
			}
		}
		d.size = descSize(d)
		d.bits = 1
		if c == TypeStruct {
			for _, m := range d.Members {
				d.bits += m.Type.NumBits()
				if d.bits > MaxValueNodes {
					r.Fail(field, "structure has more than "+strconv.Itoa(MaxValueNodes)+" fields")
					return nil
				}
			}
		}
		return d
	case c == TypeStructArray, c == TypeUnionArray:
		e := readDesc(r, field, tc, depth+1)
		if r.Failed() {
			return nil
		}
		if e == nil || e.Code != c&^TypeArray {
			r.Fail(field, c.String()+" element is not a "+(c&^TypeArray).String())
			return nil
		}
		d := &FieldDesc{Code: c, Elem: e, nodes: 1 + descNodes(e), size: descOverhead + descSize(e)}
		if d.nodes > MaxValueNodes {
			r.Fail(field, "type has more than "+strconv.Itoa(MaxValueNodes)+" nodes when expanded")
			return nil
		}
		return d
	}
	r.Fail(field, "unsupported type code 0x"+strconv.FormatUint(uint64(code), 16))
	return nil
}

// AppendFieldDesc writes d in plain form (no cache forms); nil is the null
// type 0xFF.
func AppendFieldDesc(w *Writer, d *FieldDesc) {
	if d == nil {
		w.U8(typeNull)
		return
	}
	w.U8(uint8(d.Code))
	switch d.Code {
	case TypeStruct, TypeUnion:
		w.String(d.ID)
		w.Size(len(d.Members))
		for _, m := range d.Members {
			w.String(m.Name)
			AppendFieldDesc(w, m.Type)
		}
	case TypeStructArray, TypeUnionArray:
		AppendFieldDesc(w, d.Elem)
	}
}

// Value is a pvData value: a node of a generic tree shaped by its Type.
// Which fields are used depends on Type.Code:
//
//	bool, int*:      Int (bool as 0/1)        uint*:  Uint
//	float, double:   Float                    string: Str
//	scalar arrays:   Bools, Ints, Uints, Floats or Strs, by element kind
//	struct:          Fields, one per member, in member order
//	union:           Selector (-1 none) and Fields[0] when selected
//	any:             Fields[0] with its own Type, or no Fields when empty
//	struct[]/union[]/any[]: Elems (nil entries are null elements)
type Value struct {
	Type     *FieldDesc
	Int      int64
	Uint     uint64
	Float    float64
	Str      string
	Bools    []bool
	Ints     []int64
	Uints    []uint64
	Floats   []float64
	Strs     []string
	Fields   []*Value
	Selector int
	Elems    []*Value
}

// NewValue returns the zero value of d: structures get all members, unions
// and any are empty, arrays empty.
func NewValue(d *FieldDesc) *Value {
	v := &Value{Type: d, Selector: -1}
	if d.Code == TypeStruct {
		v.Fields = make([]*Value, len(d.Members))
		for i, m := range d.Members {
			v.Fields[i] = NewValue(m.Type)
		}
	}
	return v
}

// Field returns the struct member called name, or nil. A dotted name walks
// nested structures ("query.op").
func (v *Value) Field(name string) *Value {
	for v != nil {
		head, rest, dotted := cut(name)
		if v.Type == nil || v.Type.Code != TypeStruct {
			return nil
		}
		i := v.Type.Index(head)
		if i < 0 || i >= len(v.Fields) {
			return nil
		}
		v = v.Fields[i]
		if !dotted {
			return v
		}
		name = rest
	}
	return nil
}

func cut(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// valueDecoder carries the per-call node budget.
type valueDecoder struct {
	r     *Reader
	tc    *TypeCache
	nodes int
}

func (d *valueDecoder) node(field string) bool {
	d.nodes++
	if d.nodes > MaxValueNodes {
		d.r.Fail(field, "value has more than "+strconv.Itoa(MaxValueNodes)+" nodes")
		return false
	}
	return true
}

// ReadValue reads the full value of type t. tc resolves descriptors inside
// any (variant) values.
func ReadValue(r *Reader, field string, t *FieldDesc, tc *TypeCache) *Value {
	d := valueDecoder{r: r, tc: tc}
	v := d.value(field, t, 0)
	if r.Failed() {
		return nil
	}
	return v
}

// ReadTypeValue reads "type + full value": a descriptor, then its value
// unless the descriptor was the null type (which yields nil).
func ReadTypeValue(r *Reader, field string, tc *TypeCache) *Value {
	t := ReadFieldDesc(r, field, tc)
	if t == nil || r.Failed() {
		return nil
	}
	return ReadValue(r, field, t, tc)
}

func (d *valueDecoder) value(field string, t *FieldDesc, depth int) *Value {
	r := d.r
	if depth > MaxDepth {
		r.Fail(field, "value nesting deeper than "+strconv.Itoa(MaxDepth))
		return nil
	}
	if !d.node(field) {
		return nil
	}
	v := &Value{Type: t, Selector: -1}
	d.fill(field, v, depth)
	return v
}

// fill decodes the full value of v.Type into v (whose containers may be
// replaced).
func (d *valueDecoder) fill(field string, v *Value, depth int) {
	r := d.r
	t := v.Type
	switch c := t.Code; {
	case c == TypeString:
		v.Str = r.String(field)
	case c.IsScalar():
		v.Int, v.Uint, v.Float = readScalar(r, field, c)
	case c.IsScalarArray():
		d.array(field, v, c.Elem())
	case c == TypeStruct:
		if len(v.Fields) != len(t.Members) {
			v.Fields = make([]*Value, len(t.Members))
		}
		for i, m := range t.Members {
			if r.Failed() {
				return
			}
			if v.Fields[i] == nil || v.Fields[i].Type != m.Type {
				v.Fields[i] = d.value(m.Name, m.Type, depth+1)
			} else {
				if !d.node(field) {
					return
				}
				d.fill(m.Name, v.Fields[i], depth+1)
			}
		}
	case c == TypeUnion:
		v.Selector = r.Selector(field)
		v.Fields = nil
		if v.Selector < 0 || r.Failed() {
			v.Selector = -1
			return
		}
		if v.Selector >= len(t.Members) {
			r.Fail(field+".selector", "selector "+strconv.Itoa(v.Selector)+" out of range")
			return
		}
		m := t.Members[v.Selector]
		v.Fields = []*Value{d.value(m.Name, m.Type, depth+1)}
	case c == TypeAny:
		v.Fields = nil
		et := readDesc(r, field, d.tc, depth+1)
		if et != nil && !r.Failed() {
			v.Fields = []*Value{d.value(field, et, depth+1)}
		}
	case c == TypeStructArray, c == TypeUnionArray, c == TypeAnyArray:
		n := r.Size(field)
		if !r.Failed() && n > r.Remaining() { // one presence byte per element
			r.Fail(field+".count", "count "+strconv.Itoa(n)+" exceeds payload")
		}
		if r.Failed() {
			return
		}
		v.Elems = make([]*Value, n)
		for i := 0; i < n && !r.Failed(); i++ {
			if r.U8(field) == 0 {
				continue
			}
			et := t.Elem
			if c == TypeAnyArray {
				et = readDesc(r, field, d.tc, depth+1)
				if et == nil {
					continue
				}
			}
			if !r.Failed() {
				v.Elems[i] = d.value(field, et, depth+1)
			}
		}
	default:
		r.Fail(field, "cannot decode a value of "+c.String())
	}
}

func readScalar(r *Reader, field string, c TypeCode) (i int64, u uint64, f float64) {
	switch c {
	case TypeBool:
		if r.U8(field) != 0 {
			i = 1
		}
	case TypeInt8:
		i = int64(int8(r.U8(field)))
	case TypeInt16:
		i = int64(int16(r.U16(field)))
	case TypeInt32:
		i = int64(int32(r.U32(field)))
	case TypeInt64:
		i = int64(r.U64(field))
	case TypeUInt8:
		u = uint64(r.U8(field))
	case TypeUInt16:
		u = uint64(r.U16(field))
	case TypeUInt32:
		u = uint64(r.U32(field))
	case TypeUInt64:
		u = r.U64(field)
	case TypeFloat32:
		f = float64(math.Float32frombits(r.U32(field)))
	case TypeFloat64:
		f = math.Float64frombits(r.U64(field))
	}
	return
}

func (d *valueDecoder) array(field string, v *Value, e TypeCode) {
	r := d.r
	n := r.Size(field)
	min := e.scalarSize()
	if e == TypeString {
		min = 1
	}
	if !r.Failed() && n > r.Remaining()/min {
		r.Fail(field+".count", "count "+strconv.Itoa(n)+" exceeds payload")
	}
	if r.Failed() {
		return
	}
	switch {
	case e == TypeString:
		v.Strs = make([]string, n)
		for i := range v.Strs {
			v.Strs[i] = r.String(field)
		}
	case e == TypeBool:
		v.Bools = make([]bool, n)
		for i := range v.Bools {
			v.Bools[i] = r.U8(field) != 0
		}
	case e.signed():
		v.Ints = make([]int64, n)
		for i := range v.Ints {
			v.Ints[i], _, _ = readScalar(r, field, e)
		}
	case e == TypeFloat32 || e == TypeFloat64:
		v.Floats = make([]float64, n)
		for i := range v.Floats {
			_, _, v.Floats[i] = readScalar(r, field, e)
		}
	default:
		v.Uints = make([]uint64, n)
		for i := range v.Uints {
			_, v.Uints[i], _ = readScalar(r, field, e)
		}
	}
}

// AppendValue writes the full value of v (its Type's layout). Missing
// struct members are written as zero values, so a partly built tree still
// encodes to something a peer can decode.
func AppendValue(w *Writer, v *Value) {
	t := v.Type
	switch c := t.Code; {
	case c == TypeString:
		w.String(v.Str)
	case c.IsScalar():
		appendScalar(w, c, v.Int, v.Uint, v.Float)
	case c.IsScalarArray():
		e := c.Elem()
		switch {
		case e == TypeString:
			w.Size(len(v.Strs))
			for _, s := range v.Strs {
				w.String(s)
			}
		case e == TypeBool:
			w.Size(len(v.Bools))
			for _, b := range v.Bools {
				if b {
					w.U8(1)
				} else {
					w.U8(0)
				}
			}
		case e.signed():
			w.Size(len(v.Ints))
			for _, x := range v.Ints {
				appendScalar(w, e, x, 0, 0)
			}
		case e == TypeFloat32 || e == TypeFloat64:
			w.Size(len(v.Floats))
			for _, x := range v.Floats {
				appendScalar(w, e, 0, 0, x)
			}
		default:
			w.Size(len(v.Uints))
			for _, x := range v.Uints {
				appendScalar(w, e, 0, x, 0)
			}
		}
	case c == TypeStruct:
		for i, m := range t.Members {
			if i < len(v.Fields) && v.Fields[i] != nil {
				AppendValue(w, v.Fields[i])
			} else {
				AppendValue(w, NewValue(m.Type))
			}
		}
	case c == TypeUnion:
		if v.Selector < 0 || v.Selector >= len(t.Members) || len(v.Fields) == 0 || v.Fields[0] == nil {
			w.U8(typeNull)
			return
		}
		w.Size(v.Selector)
		AppendValue(w, v.Fields[0])
	case c == TypeAny:
		if len(v.Fields) == 0 || v.Fields[0] == nil || v.Fields[0].Type == nil {
			w.U8(typeNull)
			return
		}
		AppendFieldDesc(w, v.Fields[0].Type)
		AppendValue(w, v.Fields[0])
	case c == TypeStructArray, c == TypeUnionArray, c == TypeAnyArray:
		w.Size(len(v.Elems))
		for _, e := range v.Elems {
			if e == nil || (c == TypeAnyArray && e.Type == nil) {
				w.U8(0)
				continue
			}
			w.U8(1)
			if c == TypeAnyArray {
				AppendFieldDesc(w, e.Type)
			}
			AppendValue(w, e)
		}
	}
}

func appendScalar(w *Writer, c TypeCode, i int64, u uint64, f float64) {
	bits := u
	switch {
	case c == TypeBool && i != 0:
		bits = 1
	case c == TypeBool:
		bits = 0
	case c.signed():
		bits = uint64(i)
	case c == TypeFloat32:
		bits = uint64(math.Float32bits(float32(f)))
	case c == TypeFloat64:
		bits = math.Float64bits(f)
	}
	switch c.scalarSize() { // 0 (string, not a scalar): nothing
	case 1:
		w.U8(uint8(bits))
	case 2:
		w.U16(uint16(bits))
	case 4:
		w.U32(uint32(bits))
	case 8:
		w.U64(bits)
	}
}

// AppendTypeValue writes "type + full value": nil is the null type 0xFF.
func AppendTypeValue(w *Writer, v *Value) {
	if v == nil || v.Type == nil {
		w.U8(typeNull)
		return
	}
	AppendFieldDesc(w, v.Type)
	AppendValue(w, v)
}

// DecodeTypeValue decodes a standalone "type + full value" (for example a
// ClientValidation auth payload). Trailing bytes are an error.
func DecodeTypeValue(b []byte, bigEndian bool, msg string, tc *TypeCache) (*Value, error) {
	r := NewReader(b, bigEndian, msg)
	v := ReadTypeValue(&r, "value", tc)
	if !r.Failed() && r.Remaining() != 0 {
		r.Fail("value", strconv.Itoa(r.Remaining())+" trailing bytes")
	}
	return v, r.Err()
}
