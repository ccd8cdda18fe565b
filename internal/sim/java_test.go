package sim

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
)

// udpSearchCIDs sends one search with the given CIDs (one name each) to
// dst and collects the responses that arrive within wait.
func udpSearchCIDs(t *testing.T, dst netip.AddrPort, flags uint8, wait time.Duration, names []pva.SearchName) []pva.SearchResponse {
	t.Helper()
	uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopback, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	s := pva.Search{Seq: 0x1234, Flags: flags, ReplyPort: uint16(uc.LocalAddr().(*net.UDPAddr).Port),
		Protocols: [][]byte{[]byte("tcp")}, Names: names}
	if _, err := uc.WriteToUDPAddrPort(pva.AppendSearch(nil, pva.FlagBigEndian, &s), dst); err != nil {
		t.Fatal(err)
	}
	var out []pva.SearchResponse
	buf := make([]byte, 2048)
	deadline := time.Now().Add(wait)
	for {
		_ = uc.SetReadDeadline(deadline)
		n, _, err := uc.ReadFromUDPAddrPort(buf)
		if err != nil {
			return out
		}
		h, p, _, err := pva.SplitMessage(buf[:n])
		var r pva.SearchResponse
		if err != nil || h.Command != pva.CmdSearchResponse || r.Decode(p, h.BigEndian()) != nil {
			t.Fatalf("bad reply: %v %v", h, err)
		}
		r.CIDs = slices.Clone(r.CIDs)
		out = append(out, r)
	}
}

// A Java server (Phoebus core-pva) answers each name on its own, takes a
// negative CID for a "list servers" ping (no claim, sequence ID 0 over
// UDP), and ignores names it does not serve.
func TestJavaServerSearches(t *testing.T) {
	s := startSite(t, Options{Java: true, NamesPerServer: 2})
	inf := s.Server(0)
	names := []pva.SearchName{
		{CID: 7, Name: []byte("sim:s0:pv0")},
		{CID: 0x80000009, Name: []byte("sim:s0:pv1")}, // negative: a ping
		{CID: 0, Name: []byte("sim:s0:pv1")},
		{CID: 11, Name: []byte("absent")},
	}
	got := udpSearchCIDs(t, inf.UDP, pva.SearchUnicast, 300*time.Millisecond, names)
	var claimed []uint32
	pings := 0
	for _, r := range got {
		switch {
		case r.GUID != inf.GUID || r.Port != inf.TCP.Port():
			t.Fatalf("reply %+v", r)
		case r.Found && r.Seq == 0x1234 && len(r.CIDs) == 1:
			claimed = append(claimed, r.CIDs[0])
		case !r.Found && r.Seq == 0 && len(r.CIDs) == 0:
			pings++
		default:
			t.Fatalf("reply %+v", r)
		}
	}
	slices.Sort(claimed)
	if !slices.Equal(claimed, []uint32{0, 7}) || pings != 1 {
		t.Fatalf("claimed %v and %d ping replies, want [0 7] and 1", claimed, pings)
	}
	// A discovery ping (no names) is answered only with MustReply.
	if got := udpSearchCIDs(t, inf.UDP, pva.SearchMustReply, 300*time.Millisecond, nil); len(got) != 1 || got[0].Found || got[0].Seq != 0 {
		t.Fatalf("ping answered %+v", got)
	}

	// Over TCP: no reply to a search without names; a ping reply keeps the
	// sequence ID; CREATE_CHANNEL `server` is never answered (the echo
	// sent after it comes back first), a served name is created.
	c := dialClient(t, inf.TCP)
	c.send(pva.AppendSearch(nil, pva.FlagBigEndian, &pva.Search{Seq: 1, Flags: pva.SearchMustReply, Protocols: [][]byte{[]byte("tcp")}}))
	c.send(pva.AppendSearch(nil, pva.FlagBigEndian, &pva.Search{Seq: 2, Flags: pva.SearchUnicast, Protocols: [][]byte{[]byte("tcp")},
		Names: []pva.SearchName{{CID: 0xFFFFFFFF, Name: []byte("sim:s0:pv0")}, {CID: 3, Name: []byte("sim:s0:pv0")}}}))
	c.send(pva.AppendCreateChannel(nil, 0, &pva.CreateChannel{Channels: []pva.ChannelRequest{{CID: 5, Name: "server"}}}))
	c.send(pva.AppendEcho(nil, 0, []byte("after")))
	var r pva.SearchResponse
	if h, p := c.read(); h.Command != pva.CmdSearchResponse || r.Decode(p, h.BigEndian()) != nil || r.Seq != 2 || r.Found || len(r.CIDs) != 0 {
		t.Fatalf("first TCP reply %+v %+v, want the ping reply to search 2", h, r)
	}
	if h, p := c.read(); h.Command != pva.CmdSearchResponse || r.Decode(p, h.BigEndian()) != nil || r.Seq != 2 || !r.Found || !slices.Equal(r.CIDs, []uint32{3}) {
		t.Fatalf("second TCP reply %+v %+v, want the claim of CID 3", h, r)
	}
	if h, p := c.read(); h.Command != pva.CmdEcho || string(p) != "after" {
		t.Fatalf("got %+v %q, want the echo: CREATE_CHANNEL server is not answered", h, p)
	}
	if r := c.create(9, "sim:s0:pv1"); !r.Status.OK() {
		t.Fatalf("served name not created: %+v", r)
	}
	if n := s.Server(0).UnknownCreates; n != 1 {
		t.Fatalf("UnknownCreates %d, want 1", n)
	}
}

// A Java server sends no beacons, on schedule or asked.
func TestJavaServerNoBeacons(t *testing.T) {
	rx, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopback, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	to := rx.LocalAddr().(*net.UDPAddr).AddrPort()
	s := startSite(t, Options{Java: true, BeaconDests: []netip.AddrPort{to}, BeaconInterval: 10 * time.Millisecond})
	_ = s.Beacon(0, to)
	_ = rx.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _, err := rx.ReadFromUDPAddrPort(make([]byte, 1500)); err == nil {
		t.Fatalf("a %d-byte datagram from a Java server", n)
	}
}
