package udpsearch

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
)

// cppForward builds what a pvAccessCPP server sends to the loopback group
// for a unicast search it received (docs/protocol.md, "Unicast
// forwarding"): the original header's first three bytes (magic, version,
// flags with the client's byte order), CMD_ORIGIN_TAG, a length of 16 in
// that byte order, its socket's bind address, then the search with the
// Unicast flag cleared and the reply address filled in.
func cppForward(bigEndian bool, bind, reply netip.Addr, port uint16, names ...string) []byte {
	s := &pva.Search{Seq: 0x1234, ReplyAddr: pva.AddressFrom(reply), ReplyPort: port, Protocols: [][]byte{[]byte("tcp")}}
	for i, n := range names {
		s.Names = append(s.Names, pva.SearchName{CID: uint32(100 + i), Name: []byte(n)})
	}
	var flags uint8
	if bigEndian {
		flags = pva.FlagBigEndian
	}
	msg := pva.AppendSearch(nil, flags, s)
	out := append([]byte(nil), msg[:3]...)
	out = append(out, byte(pva.CmdOriginTag))
	if bigEndian {
		out = binary.BigEndian.AppendUint32(out, 16)
	} else {
		out = binary.LittleEndian.AppendUint32(out, 16)
	}
	a := pva.AddressFrom(bind)
	if !bind.IsValid() {
		a = pva.AnyIPv4
	}
	out = append(out, a[:]...)
	return append(out, msg...)
}

// A search forwarded by a pvAccessCPP neighbour, in its format and in
// either byte order (a pvAccessCPP client on x86 searches little endian),
// tagged with the neighbour's socket address (127.0.0.1, or the wildcard),
// is answered to the client named in it, one reply per server.
func TestPVAccessCPPForwardedSearchAnswered(t *testing.T) {
	client := netip.MustParseAddr("127.0.0.1")
	for _, tc := range []struct {
		name      string
		bigEndian bool
		bind      netip.Addr
		from      netip.Addr
		ifIndex   int
	}{
		{"little endian, tagged 127.0.0.1", false, ipLo, ipLo, 1},
		{"big endian, tagged 127.0.0.1", true, ipLo, ipLo, 1},
		{"little endian, tagged wildcard", false, netip.Addr{}, netip.Addr{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &recSender{}
			h, st := testHandler(t, Options{AnswerNames: true, Resolver: captureRegistry()}, out)
			h.handle(&datagram{b: cppForward(tc.bigEndian, tc.bind, client, 40000, "cap:a:mbox1", "cap:b:mbox3", "nobody"),
				src: netip.MustParseAddrPort("127.0.0.1:5076"), dst: ForwardGroup, ifIndex: 1})
			if len(out.forwards) != 0 {
				t.Fatal("forwarded again")
			}
			if len(out.replies) != 2 {
				t.Fatalf("%d replies, want one per server (2); stats %+v", len(out.replies), metrics.Sprint(st))
			}
			for _, r := range out.replies {
				if r.to != netip.AddrPortFrom(client, 40000) || r.from != tc.from || r.ifIndex != tc.ifIndex {
					t.Errorf("reply to %v from %v via %d", r.to, r.from, r.ifIndex)
				}
				if _, m := decodeResponse(t, r.b); m.Seq != 0x1234 || len(m.CIDs) != 1 {
					t.Errorf("reply %+v", m)
				}
			}
		})
	}
}
