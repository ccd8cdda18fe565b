package pva

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

func makeNames(n, l int) []SearchName {
	out := make([]SearchName, n)
	for i := range out {
		s := fmt.Sprintf("%0*d", l, i)
		out[i] = SearchName{CID: uint32(0x12345678 + i), Name: []byte(s)}
	}
	return out
}

func packAll(t testing.TB, p *SearchPacker, names []SearchName) [][]byte {
	var out [][]byte
	if err := p.Pack(names, func(d []byte) { out = append(out, bytes.Clone(d)) }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSearchOverheadIs41(t *testing.T) {
	if got := SearchOverhead([]string{"tcp"}); got != 41 {
		t.Fatalf("overhead = %d, want 41", got)
	}
	if got := SearchOverhead([]string{"tls", "tcp"}); got != 45 {
		t.Fatalf("overhead tls,tcp = %d, want 45", got)
	}
}

func TestPackCapacityMatchesSpec(t *testing.T) {
	for _, tc := range []struct{ l, want int }{{20, 54}, {30, 38}, {40, 30}} {
		if got := searchCapacity(tc.l, []string{"tcp"}); got != tc.want {
			t.Errorf("capacity(L=%d) = %d, want %d", tc.l, got, tc.want)
		}
		p := NewSearchPacker(5076)
		dgs := packAll(t, p, makeNames(tc.want*3+1, tc.l))
		if len(dgs) != 4 {
			t.Fatalf("L=%d: %d datagrams, want 4", tc.l, len(dgs))
		}
		total := 0
		for i, d := range dgs {
			if len(d) > MaxSearchDatagram {
				t.Errorf("datagram %d is %d bytes", i, len(d))
			}
			h, payload, rest, err := SplitMessage(d)
			if err != nil || len(rest) != 0 || h.Command != CmdSearch || !h.BigEndian() {
				t.Fatalf("bad datagram: %v %v", h, err)
			}
			var s Search
			if err := s.Decode(payload, true); err != nil {
				t.Fatal(err)
			}
			if i < 3 && len(s.Names) != tc.want {
				t.Errorf("L=%d datagram %d holds %d names, want %d", tc.l, i, len(s.Names), tc.want)
			}
			if i < 3 && len(d) != 41+tc.want*(5+tc.l) {
				t.Errorf("datagram size %d", len(d))
			}
			for _, n := range s.Names {
				if want := fmt.Sprintf("%0*d", tc.l, total); string(n.Name) != want || n.CID != uint32(0x12345678+total) {
					t.Fatalf("name %d = %q/%x", total, n.Name, n.CID)
				}
				total++
			}
		}
		if total != tc.want*3+1 {
			t.Fatalf("total names %d", total)
		}
	}
}

func TestPackOversizedAndTooLong(t *testing.T) {
	p := NewSearchPacker(5076)
	big := SearchName{CID: 7, Name: bytes.Repeat([]byte("x"), 2000)}
	huge := SearchName{CID: 8, Name: bytes.Repeat([]byte("y"), 70000)}
	names := append(makeNames(2, 30), big, huge)
	names = append(names, makeNames(1, 30)...)
	var dgs [][]byte
	err := p.Pack(names, func(d []byte) { dgs = append(dgs, bytes.Clone(d)) })
	if !errors.Is(err, ErrNameTooLong) {
		t.Fatalf("err = %v, want ErrNameTooLong", err)
	}
	if len(dgs) != 3 {
		t.Fatalf("%d datagrams, want 3 (2 names, oversized alone, 1 name)", len(dgs))
	}
	_, payload, _, _ := SplitMessage(dgs[1])
	var s Search
	if err := s.Decode(payload, true); err != nil || len(s.Names) != 1 || s.Names[0].CID != 7 {
		t.Fatalf("oversized datagram: %v %+v", err, s.Names)
	}
	if len(dgs[1]) != 41+4+5+2000 {
		t.Fatalf("oversized datagram len %d", len(dgs[1]))
	}
}

func BenchmarkPack10000Names(b *testing.B) {
	names := makeNames(10000, 30)
	p := NewSearchPacker(5076)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		_ = p.Pack(names, func(d []byte) { n++ })
	}
}

// searchCapacity is floor((Max-overhead)/(5+L)): names of length L that
// fit one datagram (54, 38, 30 at L = 20, 30, 40 with ["tcp"]).
func searchCapacity(nameLen int, protocols []string) int {
	return (MaxSearchDatagram - SearchOverhead(protocols)) / SearchNameCost(nameLen)
}
