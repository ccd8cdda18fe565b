package twin

import "testing"

// search38 is a 38-name PVXS search of ~1,400 bytes, as one tick sends.
func search38(port uint16, base uint32) []byte {
	cids := make([]uint32, 38)
	for i := range cids {
		cids[i] = base + uint32(i)
	}
	b := search(0x80, port, cids...)
	// Names of ~30 bytes, as at a site: pad each 4-byte name's message
	// to the size of a real one.
	return append(b, make([]byte, 38*26)...)
}

// BenchmarkUDPSearch38 is what pairing costs the UDP answer path per
// search (Fingerprint and UDPSearch, as udpsearch calls them): "noconn"
// with no TCP name-server connection open (pairing on, nothing to pair;
// a caller checking Active first skips both),
// "otherhost" with one open from another host, "paired" a client whose
// socket is paired with its connection (its searches are still compared).
func BenchmarkUDPSearch38(b *testing.B) {
	for _, mode := range []string{"noconn", "otherhost", "paired"} {
		b.Run(mode, func(b *testing.B) {
			tb, clk := newTable()
			ps := make([][]byte, 64)
			for i := range ps {
				ps[i] = search38(40001, uint32(i*38))
			}
			switch mode {
			case "otherhost":
				tb.Join(hostB, func([]byte) bool { return true })
			case "paired":
				c := tb.Join(hostA, func([]byte) bool { return true })
				f, _ := tb.Fingerprint(ps[0])
				c.TCPSearch(f)
				tb.UDPSearch(portA, f)
				if tb.Paired(portA) != c {
					b.Fatal("not paired")
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if f, ok := tb.Fingerprint(ps[i%len(ps)]); ok {
					tb.UDPSearch(portA, f)
				}
				i++
				if i%len(ps) == 0 {
					clk.Advance(recentFor / 4) // a tick later: the fingerprints expire
				}
			}
			if mode == "paired" && tb.Paired(portA) == nil {
				b.Fatal("pair lost")
			}
		})
	}
}
