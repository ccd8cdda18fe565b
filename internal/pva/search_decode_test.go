package pva

import (
	"fmt"
	"testing"
	"unsafe"
)

// readerSearchNames decodes a search's names the way Decode did before its
// short-name loop: every name through the Reader. It is the reference
// the loop must match, name for name, offset for offset, error for error.
func readerSearchNames(payload []byte, be bool) ([]SearchName, error) {
	var s Search
	r := NewReader(payload, be, "CMD_SEARCH")
	r.U32("searchSequenceID")
	r.U8("flags")
	r.Skip(3, "reserved")
	r.Address("replyAddress")
	r.U16("replyPort")
	np := r.Size("protocols.count")
	if !r.Failed() && np > r.Remaining() {
		r.Fail("protocols.count", "count exceeds payload")
	}
	for i := 0; i < np && !r.Failed(); i++ {
		r.StringBytes("protocols")
	}
	n := int(r.U16("count"))
	if !r.Failed() && n*minNameBytes > r.Remaining() {
		r.Fail("count", "count exceeds payload")
	}
	for i := 0; i < n && !r.Failed(); i++ {
		cid := r.U32("names.cid")
		name := r.StringBytes("names.name")
		s.Names = append(s.Names, SearchName{CID: cid, Off: uint32(r.Off - len(name)), Name: name})
	}
	return s.Names, r.Err()
}

// sameAsReader fails t unless s and err, Decode's, are what the Reader
// alone reads from payload.
func sameAsReader(t *testing.T, payload []byte, be bool, s *Search, err error) {
	t.Helper()
	want, werr := readerSearchNames(payload, be)
	if fmt.Sprint(err) != fmt.Sprint(werr) {
		t.Fatalf("error %v, the Reader's %v", err, werr)
	}
	if len(s.Names) != len(want) {
		t.Fatalf("%d names, the Reader's %d", len(s.Names), len(want))
	}
	for i, w := range want {
		g := s.Names[i]
		if g.CID != w.CID || g.Off != w.Off || string(g.Name) != string(w.Name) ||
			(g.Name == nil) != (w.Name == nil) || cap(g.Name) != cap(w.Name) {
			t.Fatalf("name %d: %+v, the Reader's %+v", i, g, w)
		}
	}
}

// Decode reads short names straight from the payload and everything else
// through the Reader: with short, empty, null and long (5-byte size)
// names in both byte orders, cut at every length, it reads what the
// Reader alone reads.
func TestSearchDecodeMatchesReader(t *testing.T) {
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'L'
	}
	for _, be := range []bool{true, false} {
		flags := flagsFor(be)
		msg := AppendSearch(nil, flags, &Search{Seq: 7, ReplyPort: 5076, Protocols: [][]byte{[]byte("tcp")}, Names: []SearchName{
			{CID: 1, Name: []byte("a:b")}, {CID: 0x01020304, Name: []byte{}}, {CID: 3, Name: long},
			{CID: 4, Name: []byte("x")}, {CID: 5, Name: make([]byte, 253)},
		}})
		_, payload, _, err := SplitMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		// And a null name (size 0xFF): a sixth, counted at offset 31
		// (after seq, flags, reserved, address, port and "tcp").
		if be {
			payload = append(payload, 0, 0, 0, 9, 0xFF)
			payload[31], payload[32] = 0, 6
		} else {
			payload = append(payload, 9, 0, 0, 0, 0xFF)
			payload[31], payload[32] = 6, 0
		}
		for cut := 0; cut <= len(payload); cut++ {
			p := payload[:cut:cut]
			var s Search
			err := s.Decode(p, be)
			sameAsReader(t, p, be, &s, err)
		}
		var s Search
		if err := s.Decode(payload, be); err != nil || len(s.Names) != 6 || len(s.Names[2].Name) != 300 || s.Names[1].CID != 0x01020304 ||
			s.Names[5].Name != nil || s.Names[5].CID != 9 {
			t.Fatalf("whole: %v, %d names", err, len(s.Names))
		}
	}
}

// Off sits in CID's padding (SearchName's comment, docs/PERFORMANCE.md):
// a SearchName is no bigger than a CID and a slice header with it.
func TestSearchNameOffInCIDPadding(t *testing.T) {
	if got, want := unsafe.Sizeof(SearchName{}), unsafe.Sizeof(struct {
		CID  uint32
		Name []byte
	}{}); got != want {
		t.Fatalf("SearchName is %d bytes, %d without Off", got, want)
	}
}
