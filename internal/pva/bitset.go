package pva

import "strconv"

// BitSet is a pvData BitSet (GET/PUT/MONITOR changed-fields mask): bit i of
// word i/64. Bit numbers are pre-order field offsets in a structure: 0 the
// whole structure, then each member, its sub-members, and so on.
type BitSet []uint64

// Set sets bit i.
func (b *BitSet) Set(i int) {
	for len(*b) <= i/64 {
		*b = append(*b, 0)
	}
	(*b)[i/64] |= 1 << (i % 64)
}

// Has reports bit i.
func (b BitSet) Has(i int) bool { return i >= 0 && i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0 }

// ReadBitSet reads a BitSet (docs/protocol.md, "Primitive encodings"): Size
// in bytes, whole 64-bit words in message order, then the trailing bytes
// LSB first. dst is reused. The result is never nil (an empty set is not
// "unset": see AppendGetReply).
func ReadBitSet(r *Reader, field string, dst BitSet) BitSet {
	n := r.Size(field)
	if !r.Failed() && n > r.Remaining() {
		r.Fail(field+".size", "size "+strconv.Itoa(n)+" exceeds payload")
	}
	if dst == nil {
		dst = BitSet{}
	}
	dst = dst[:0]
	if r.Failed() {
		return dst
	}
	for i := 0; i+8 <= n; i += 8 {
		dst = append(dst, r.U64(field))
	}
	if rem := n % 8; rem > 0 {
		var w uint64
		for i := 0; i < rem; i++ {
			w |= uint64(r.U8(field)) << (8 * i)
		}
		dst = append(dst, w)
	}
	return dst
}

// AppendBitSet writes b with trailing zero bytes omitted, as pvData does.
func AppendBitSet(w *Writer, b BitSet) {
	n := 0 // significant bytes
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			n = i * 8
			for x := b[i]; x != 0; x >>= 8 {
				n++
			}
			break
		}
	}
	w.Size(n)
	for i := 0; i < n/8; i++ {
		w.U64(b[i])
	}
	if rem := n % 8; rem > 0 {
		x := b[n/8]
		for i := 0; i < rem; i++ {
			w.U8(uint8(x >> (8 * i)))
		}
	}
}

// NumBits is the number of BitSet offsets a field of type d occupies: one
// for itself plus, for a structure, those of every member.
func (d *FieldDesc) NumBits() int {
	if d.bits > 0 {
		return d.bits
	}
	n := 1
	if d.Code == TypeStruct {
		for _, m := range d.Members {
			n += m.Type.NumBits()
		}
	}
	return n
}

// ReadPartialValue reads a partial value (GET/MONITOR reply) into v, whose
// Type gives the layout: a field whose bit is set is read in full; an
// unset structure is descended into; anything else is left as it was.
func ReadPartialValue(r *Reader, field string, v *Value, changed BitSet, tc *TypeCache) {
	d := valueDecoder{r: r, tc: tc}
	d.partial(field, v, changed, 0, 0)
}

func (d *valueDecoder) partial(field string, v *Value, changed BitSet, off, depth int) int {
	if d.r.Failed() {
		return off
	}
	if depth > MaxDepth {
		d.r.Fail(field, "value nesting deeper than "+strconv.Itoa(MaxDepth))
		return off
	}
	t := v.Type
	if changed.Has(off) {
		if d.node(field) {
			d.fill(field, v, depth)
		}
		return off + t.NumBits()
	}
	off++
	if t.Code == TypeStruct {
		if len(v.Fields) != len(t.Members) {
			d.r.Fail(field, "value does not match its structure type")
			return off
		}
		for i, m := range t.Members {
			off = d.partial(m.Name, v.Fields[i], changed, off, depth+1)
		}
	}
	return off
}

// AppendPartialValue writes the parts of v selected by changed, the inverse
// of ReadPartialValue.
func AppendPartialValue(w *Writer, v *Value, changed BitSet) {
	appendPartial(w, v, changed, 0)
}

func appendPartial(w *Writer, v *Value, changed BitSet, off int) int {
	t := v.Type
	if changed.Has(off) {
		AppendValue(w, v)
		return off + t.NumBits()
	}
	off++
	if t.Code == TypeStruct {
		for i, m := range t.Members {
			if i < len(v.Fields) && v.Fields[i] != nil {
				off = appendPartial(w, v.Fields[i], changed, off)
			} else {
				off = appendPartial(w, NewValue(m.Type), changed, off)
			}
		}
	}
	return off
}
