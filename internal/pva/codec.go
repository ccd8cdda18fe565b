package pva

import (
	"encoding/binary"
	"math"
	"net/netip"
	"strconv"
)

func shortReason(need, have int) string {
	return "short buffer: need " + strconv.Itoa(need) + " bytes, have " + strconv.Itoa(have)
}

// Reader walks a payload in one byte order. The first failure is sticky:
// later reads return zero values, and Err reports the first error with the
// message and field named by the caller, so decoders read straight through
// and check once.
type Reader struct {
	B   []byte
	Off int
	BE  bool
	Msg string // message being decoded, for errors
	err *DecodeError
}

// NewReader reads b in the given byte order; msg names the message in errors.
func NewReader(b []byte, bigEndian bool, msg string) Reader {
	return Reader{B: b, BE: bigEndian, Msg: msg}
}

// Err returns the first decode error, or nil.
func (r *Reader) Err() error {
	if r.err == nil {
		return nil
	}
	return r.err
}

// Failed reports whether a read has failed.
func (r *Reader) Failed() bool { return r.err != nil }

// Fail records an error for field (if none is recorded yet).
func (r *Reader) Fail(field, reason string) {
	if r.err == nil {
		r.err = &DecodeError{Msg: r.Msg, Field: field, Off: r.Off, Reason: reason}
	}
}

// Remaining is the number of unread bytes.
func (r *Reader) Remaining() int { return len(r.B) - r.Off }

func (r *Reader) need(n int, field string) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || len(r.B)-r.Off < n {
		r.Fail(field, shortReason(n, len(r.B)-r.Off))
		return false
	}
	return true
}

// U8 reads one byte.
func (r *Reader) U8(field string) uint8 {
	if !r.need(1, field) {
		return 0
	}
	v := r.B[r.Off]
	r.Off++
	return v
}

// U16 reads a uint16 in the reader's byte order.
func (r *Reader) U16(field string) uint16 {
	if !r.need(2, field) {
		return 0
	}
	var v uint16
	if r.BE {
		v = binary.BigEndian.Uint16(r.B[r.Off:])
	} else {
		v = binary.LittleEndian.Uint16(r.B[r.Off:])
	}
	r.Off += 2
	return v
}

// U32 reads a uint32 in the reader's byte order.
func (r *Reader) U32(field string) uint32 {
	if !r.need(4, field) {
		return 0
	}
	var v uint32
	if r.BE {
		v = binary.BigEndian.Uint32(r.B[r.Off:])
	} else {
		v = binary.LittleEndian.Uint32(r.B[r.Off:])
	}
	r.Off += 4
	return v
}

// U64 reads a uint64 in the reader's byte order.
func (r *Reader) U64(field string) uint64 {
	if !r.need(8, field) {
		return 0
	}
	var v uint64
	if r.BE {
		v = binary.BigEndian.Uint64(r.B[r.Off:])
	} else {
		v = binary.LittleEndian.Uint64(r.B[r.Off:])
	}
	r.Off += 8
	return v
}

// Bytes returns a view of the next n bytes (not a copy).
func (r *Reader) Bytes(n int, field string) []byte {
	if !r.need(n, field) {
		return nil
	}
	v := r.B[r.Off : r.Off+n : r.Off+n]
	r.Off += n
	return v
}

// Skip advances n bytes.
func (r *Reader) Skip(n int, field string) {
	if r.need(n, field) {
		r.Off += n
	}
}

// Size reads a pvData Size. 0xFF (null) is an error here; strings use
// StringBytes, which accepts it as the empty string, as PVXS does.
func (r *Reader) Size(field string) int {
	n, null := r.sizeOrNull(field)
	if null {
		r.Fail(field, "null size (0xFF) where a size is required")
		return 0
	}
	return n
}

// Selector reads a union selector: -1 means no member selected (0xFF).
func (r *Reader) Selector(field string) int {
	n, null := r.sizeOrNull(field)
	if null {
		return -1
	}
	return n
}

func (r *Reader) sizeOrNull(field string) (int, bool) {
	b := r.U8(field)
	switch {
	case r.err != nil:
		return 0, false
	case b < 0xFE:
		return int(b), false
	case b == 0xFF:
		return 0, true
	}
	v := r.U32(field)
	if v > math.MaxInt32 {
		r.Fail(field, "size "+strconv.FormatUint(uint64(v), 10)+" exceeds 2^31-1")
		return 0, false
	}
	return int(v), false
}

// StringBytes reads a String and returns a view of its bytes in the buffer.
// The length is checked against the remaining payload before anything is
// touched, so a hostile length never allocates.
func (r *Reader) StringBytes(field string) []byte {
	n, null := r.sizeOrNull(field)
	if null || r.err != nil {
		return nil
	}
	return r.Bytes(n, field)
}

// String reads a String and copies it into a Go string.
func (r *Reader) String(field string) string { return string(r.StringBytes(field)) }

// Address reads a 16-byte address.
func (r *Reader) Address(field string) Address {
	var a Address
	if r.need(16, field) {
		copy(a[:], r.B[r.Off:])
		r.Off += 16
	}
	return a
}

// GUID reads 12 bytes verbatim.
func (r *Reader) GUID(field string) GUID {
	var g GUID
	if r.need(12, field) {
		copy(g[:], r.B[r.Off:])
		r.Off += 12
	}
	return g
}

// Writer appends to a byte slice in one byte order. Encoders take a
// caller-owned buffer so hot paths reuse memory and allocate nothing.
type Writer struct {
	B  []byte
	BE bool
}

// U8 appends one byte.
func (w *Writer) U8(v uint8) { w.B = append(w.B, v) }

// U16 appends a uint16.
func (w *Writer) U16(v uint16) {
	if w.BE {
		w.B = binary.BigEndian.AppendUint16(w.B, v)
	} else {
		w.B = binary.LittleEndian.AppendUint16(w.B, v)
	}
}

// U32 appends a uint32.
func (w *Writer) U32(v uint32) {
	if w.BE {
		w.B = binary.BigEndian.AppendUint32(w.B, v)
	} else {
		w.B = binary.LittleEndian.AppendUint32(w.B, v)
	}
}

// U64 appends a uint64.
func (w *Writer) U64(v uint64) {
	if w.BE {
		w.B = binary.BigEndian.AppendUint64(w.B, v)
	} else {
		w.B = binary.LittleEndian.AppendUint64(w.B, v)
	}
}

// Size appends a pvData Size (one byte below 254, else 0xFE + u32).
func (w *Writer) Size(n int) {
	if n < 0xFE {
		w.B = append(w.B, byte(n))
		return
	}
	w.B = append(w.B, 0xFE)
	w.U32(uint32(n))
}

// String appends a String.
func (w *Writer) String(s string) {
	w.Size(len(s))
	w.B = append(w.B, s...)
}

// StringBytes appends a String from bytes.
func (w *Writer) StringBytes(s []byte) {
	w.Size(len(s))
	w.B = append(w.B, s...)
}

// Address appends 16 address bytes.
func (w *Writer) Address(a Address) { w.B = append(w.B, a[:]...) }

// GUID appends 12 GUID bytes.
func (w *Writer) GUID(g GUID) { w.B = append(w.B, g[:]...) }

// rawTypeValue appends a "type + value" kept raw from a decode (a
// beacon's server status, a client's auth payload); nil is the null type.
func (w *Writer) rawTypeValue(b []byte) {
	if b == nil {
		w.U8(typeNull)
		return
	}
	w.B = append(w.B, b...)
}

// SizeLen is the encoded length of a Size.
func SizeLen(n int) int {
	if n < 0xFE {
		return 1
	}
	return 5
}

// Address is a 16-byte wire address: IPv6, or IPv4 as IPv4-mapped
// (::ffff:a.b.c.d). Byte order flags do not apply to it.
type Address [16]byte

// AnyIPv4 is ::ffff:0.0.0.0, what PVXS sends for "use my source address".
var AnyIPv4 = Address{10: 0xFF, 11: 0xFF}

// AddressFrom converts a netip.Addr; IPv4 becomes IPv4-mapped. The zero
// netip.Addr gives the all-zero address.
func AddressFrom(ip netip.Addr) Address {
	if !ip.IsValid() {
		return Address{}
	}
	return Address(ip.As16())
}

// IsAny reports whether a is a wildcard: all zero or ::ffff:0.0.0.0. PVXS
// treats both as "the source address of this datagram".
func (a Address) IsAny() bool { return a == Address{} || a == AnyIPv4 }

// Addr returns the address as a netip.Addr, unmapping IPv4-mapped forms.
func (a Address) Addr() netip.Addr { return netip.AddrFrom16(a).Unmap() }

func (a Address) String() string { return a.Addr().String() }
