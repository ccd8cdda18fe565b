package udpsearch

import (
	"net/netip"
	"testing"

	"github.com/pvans-project/pvans/internal/pva"
)

// FuzzDispatch feeds arbitrary datagrams to the per-datagram handler in
// every arrival context and checks what it sends, not only that it
// survives: forwards only for unicasts to a local address, at most one,
// and only as a well-formed tag + search, answers only to usable unicast
// destinations and only as well-formed responses.
func FuzzDispatch(f *testing.F) {
	f.Add(mustHex(f, capSearch))
	f.Add(mustHex(f, capForward))
	f.Add(mustHex(f, capAnswerA))
	f.Add(searchMsg(pva.SearchMustReply, netip.Addr{}, 40000, nil))
	f.Add(searchMsg(0, ipLo, 40000, []string{"tcp"}, "cap:a:mbox1", "cap:b:mbox3", "x"))
	f.Add(append(pva.AppendOriginTag(nil, pva.FlagBigEndian, pva.AddressFrom(ipLo)), mustHex(f, capForward)...))
	f.Add(pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer, &pva.Beacon{GUID: guidA, Addr: pva.AnyIPv4, Port: 5075, Protocol: "tcp"}))

	contexts := []datagram{
		{src: netip.MustParseAddrPort("10.0.0.9:5076"), dst: ipEthBc, ifIndex: 2},        // broadcast
		{src: netip.MustParseAddrPort("127.0.0.1:40000"), dst: ipLo, ifIndex: 1},         // unicast to us
		{src: netip.MustParseAddrPort("10.0.0.9:5076"), dst: ipEth, ifIndex: 2},          // unicast to us
		{src: netip.MustParseAddrPort("127.0.0.1:5076"), dst: ForwardGroup, ifIndex: 1},  // forwarded
		{src: netip.MustParseAddrPort("10.0.0.9:5076"), dst: ForwardGroup, ifIndex: 2},   // group on a LAN
		{src: netip.MustParseAddrPort("224.0.0.9:5076"), dst: ForwardGroup, ifIndex: 1},  // multicast source
		{src: netip.MustParseAddrPort("10.1.0.9:5076"), dst: ipEth, ifIndex: 3},          // weak-host unicast
		{src: netip.MustParseAddrPort("10.1.0.9:5076"), dst: netip.Addr{}, ifIndex: 999}, // unknown interface
	}
	out := &recSender{}
	h, _ := testHandler(f, Options{AnswerNames: true, Resolver: captureRegistry(), GUID: ownGUID, TCPPort: 5075,
		OnSearchResponse: func(netip.AddrPort, *pva.SearchResponse) {}, Beacons: &obsSink{}}, out)

	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range contexts {
			out.reset()
			d := c
			d.b = b
			h.handle(&d)
			unicastToUs := c.dst == ipLo || (c.dst == ipEth && c.ifIndex == 2)
			if len(out.forwards) > 0 && (len(out.forwards) > 1 || !unicastToUs || c.src.Addr().IsMulticast()) {
				t.Fatalf("ctx %+v: %d forwards, %d replies", c, len(out.forwards), len(out.replies))
			}
			if c.src.Addr().IsMulticast() && len(out.replies) > 0 {
				t.Fatalf("answered a multicast source")
			}
			for _, fw := range out.forwards {
				th, tp, rest, err := pva.SplitMessage(fw)
				if err != nil || th.Command != pva.CmdOriginTag {
					t.Fatalf("forward without tag: %x", fw)
				}
				if a, _ := pva.DecodeOriginTag(tp, th.BigEndian()); a.Addr() != c.dst {
					t.Fatalf("tag %v, destination %v", a, c.dst)
				}
				sh, sp, _, err := pva.SplitMessage(rest)
				var s pva.Search
				if err != nil || sh.Command != pva.CmdSearch || s.Decode(sp, sh.BigEndian()) != nil {
					t.Fatalf("forwarded search malformed: %x", rest)
				}
				if s.Unicast() || s.ReplyAddr.IsAny() || s.ReplyPort == 0 {
					t.Fatalf("forwarded search flags %#x reply %v:%d", s.Flags, s.ReplyAddr, s.ReplyPort)
				}
			}
			for _, r := range out.replies {
				if r.to.Port() == 0 || !r.to.Addr().Is4() || r.to.Addr().IsMulticast() || r.to.Addr().IsUnspecified() || r.to.Addr() == ipEthBc {
					t.Fatalf("reply to %v", r.to)
				}
				decodeResponse(t, r.b)
			}
		}
	})
}
