package pva

import (
	"strings"
	"testing"
)

// defineStruct is a 0xFD definition of key: a structure of n empty
// structures (3 bytes each plus a name), which decodes to n+1 descriptors.
func defineStruct(key uint16, n int) []byte {
	w := Writer{BE: true}
	w.U8(typeCacheDef)
	w.U16(key)
	w.U8(byte(TypeStruct))
	w.String("")
	w.Size(n)
	for i := 0; i < n; i++ {
		w.String("m" + strings.Repeat("x", i%3))
		w.U8(byte(TypeStruct))
		w.String("")
		w.Size(0)
	}
	return w.B
}

// sizeOf is the expanded size of defineStruct(_, n).
func sizeOf(n int) int {
	s := descOverhead
	for i := 0; i < n; i++ {
		s += memberOverhead + len("m"+strings.Repeat("x", i%3)) + descOverhead
	}
	return s
}

// TestTypeCacheBounded: definitions beyond MaxEntries or MaxBytes, or
// refused by Admit, fail the decode and are not kept; a redefinition
// replaces its key's share.
func TestTypeCacheBounded(t *testing.T) {
	tc := &TypeCache{MaxEntries: 3, MaxBytes: 2*sizeOf(9) + sizeOf(20)}
	decode := func(b []byte) error {
		r := NewReader(b, true, "test")
		ReadFieldDesc(&r, "t", tc)
		return r.Err()
	}
	for k := uint16(0); k < 3; k++ {
		if err := decode(defineStruct(k, 9)); err != nil {
			t.Fatalf("key %d: %v", k, err)
		}
	}
	if tc.Len() != 3 || tc.Bytes() != 3*sizeOf(9) {
		t.Fatalf("cache %d entries %d bytes, want %d", tc.Len(), tc.Bytes(), 3*sizeOf(9))
	}
	if err := decode(defineStruct(9, 1)); err == nil || !strings.Contains(err.Error(), "type cache full") {
		t.Fatalf("4th entry: %v", err)
	}
	if err := decode(defineStruct(1, 20)); err != nil || tc.Bytes() != tc.MaxBytes {
		t.Fatalf("redefinition to the bound: %v, %d bytes", err, tc.Bytes())
	}
	if err := decode(defineStruct(2, 10)); err == nil {
		t.Fatal("redefinition past MaxBytes accepted")
	}
	if tc.Len() != 3 || tc.Bytes() != tc.MaxBytes {
		t.Fatalf("refused definitions changed the cache: %d entries %d bytes", tc.Len(), tc.Bytes())
	}
	// A long member name counts: names are part of the expanded size.
	w := Writer{BE: true}
	w.U8(typeCacheDef)
	w.U16(7)
	w.U8(byte(TypeStruct))
	w.String("")
	w.Size(1)
	w.String(strings.Repeat("n", 60000))
	w.U8(byte(TypeInt32))
	small := &TypeCache{MaxBytes: 4096}
	r0 := NewReader(w.B, true, "test")
	ReadFieldDesc(&r0, "t", small)
	if r0.Err() == nil || small.Len() != 0 {
		t.Fatal("a 60 KB member name was cached under a 4 KiB bound")
	}
	shared := 0
	tc2 := &TypeCache{Admit: func(n int) bool {
		if shared+n > sizeOf(9)+sizeOf(2) {
			return false
		}
		shared += n
		return true
	}}
	r := NewReader(defineStruct(0, 9), true, "test")
	ReadFieldDesc(&r, "t", tc2)
	r2 := NewReader(defineStruct(1, 9), true, "test")
	ReadFieldDesc(&r2, "t", tc2)
	if r.Err() != nil || r2.Err() == nil || shared != sizeOf(9) || tc2.Len() != 1 {
		t.Fatalf("Admit: %v %v shared %d len %d", r.Err(), r2.Err(), shared, tc2.Len())
	}
}
