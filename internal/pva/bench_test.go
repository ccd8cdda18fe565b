package pva

import "testing"

// fullSearch is one packed datagram of 38 names of 30 bytes: 1400 bytes,
// the largest search a PVXS client sends for such names.
func fullSearch(b *testing.B) []byte {
	var dg []byte
	p := NewSearchPacker(5076)
	if err := p.Pack(makeNames(38, 30), func(d []byte) { dg = append([]byte(nil), d...) }); err != nil {
		b.Fatal(err)
	}
	if len(dg) != 41+38*35 || len(dg) > MaxSearchDatagram {
		b.Fatalf("datagram is %d bytes", len(dg))
	}
	return dg
}

func BenchmarkDecodeSearch38Names(b *testing.B) {
	dg := fullSearch(b)
	var s Search
	b.ReportAllocs()
	b.SetBytes(int64(len(dg)))
	for b.Loop() {
		h, p, _, err := SplitMessage(dg)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Decode(p, h.BigEndian()); err != nil || len(s.Names) != 38 {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeSearchResponse38CIDs(b *testing.B) {
	m := SearchResponse{Seq: SearchSeqFind, Addr: AnyIPv4, Port: 5075, Protocol: []byte("tcp"), Found: true}
	for i := range 38 {
		m.CIDs = append(m.CIDs, uint32(0x12345678+i))
	}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendSearchResponse(buf[:0], FlagBigEndian|FlagServer, &m)
	}
	if len(buf) != 49+4*38 {
		b.Fatalf("response is %d bytes", len(buf))
	}
}

func BenchmarkDecodeRPCChannelsReply(b *testing.B) {
	m := onlyMessage(b, 51)
	var r RPCReply
	tc := &TypeCache{}
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Decode(m.Payload, false, tc); err != nil {
			b.Fatal(err)
		}
	}
}
