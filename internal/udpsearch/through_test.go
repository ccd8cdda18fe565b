package udpsearch

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
)

// waitingResolver records the names handed to WaitUDP.
type waitingResolver struct {
	*mapResolver
	waits []udpWait
}

type udpWait struct {
	to    netip.AddrPort
	names []string
	off   resolver.Offer
}

func (r *waitingResolver) WaitUDP(to netip.AddrPort, q []pva.SearchName, missing []int, off resolver.Offer) {
	w := udpWait{to: to, off: off}
	for _, i := range missing {
		w.names = append(w.names, string(q[i].Name))
	}
	r.waits = append(r.waits, w)
}

// The names a search sent to pvans's host asks for and nobody listed are
// handed to the resolver to search through for the client (its reply
// socket, whether it listed "tls"); a broadcast search's are not (it
// reaches the servers itself), nor those of pvans's own searches heard
// back.
func TestUnicastMissesSearchedThroughForTheClient(t *testing.T) {
	res := &waitingResolver{mapResolver: captureRegistry()}
	h, _ := testHandler(t, Options{AnswerNames: true, Resolver: res}, &recSender{})
	msg := searchMsg(pva.SearchUnicast, netip.Addr{}, 40000, []string{"tls", "tcp"}, "cap:a:mbox1", "java:pv1", "java:pv2")
	src := netip.MustParseAddrPort("10.0.0.9:5555")
	h.handle(&datagram{b: msg, src: src, dst: ipEth, ifIndex: 2})
	want := udpWait{to: netip.MustParseAddrPort("10.0.0.9:40000"), names: []string{"java:pv1", "java:pv2"}, off: resolver.OfferTCP | resolver.OfferTLS}
	if len(res.waits) != 1 || res.waits[0].to != want.to || !slices.Equal(res.waits[0].names, want.names) || res.waits[0].off != want.off {
		t.Fatalf("waits %+v, want %+v", res.waits, want)
	}

	res.waits = nil
	h.handle(&datagram{b: searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "java:pv3"), src: src, dst: ipEthBc, ifIndex: 2})
	if len(res.waits) != 0 {
		t.Fatalf("a broadcast search's names searched through: %+v", res.waits)
	}

	h.ownClient[0] = 41000
	h.handle(&datagram{b: searchMsg(pva.SearchUnicast, netip.Addr{}, 41000, []string{"tcp"}, "java:pv4"), src: netip.MustParseAddrPort("127.0.0.1:41000"), dst: ipLo, ifIndex: 1})
	if len(res.waits) != 0 {
		t.Fatalf("pvans's own search searched through again: %+v", res.waits)
	}
}

// A push naming many CIDs (a listing resolving a big client's names at
// once) goes out in datagrams of at most pushCIDs CIDs, each one frame.
func TestPushAnswerSplitsIntoFrames(t *testing.T) {
	ns := newNetns(t)
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true})
	rx := udpIn(t, ns, "127.0.0.1:0")
	to := rx.LocalAddr().(*net.UDPAddr).AddrPort()
	var cids []uint32
	for i := range 600 {
		cids = append(cids, uint32(i))
	}
	s.PushAnswer(to, resolver.Group{Server: resolver.Endpoint{GUID: guidA, Addr: netip.MustParseAddrPort("127.0.0.1:5075"), Protocol: "tcp"}, CIDs: cids, Offer: resolver.OfferTCP})
	var got []uint32
	buf := make([]byte, 65536)
	for len(got) < len(cids) {
		rx.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _, err := rx.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("after %d CIDs: %v", len(got), err)
		}
		if n > 1500 {
			t.Fatalf("a pushed datagram of %d bytes", n)
		}
		_, m := decodeResponse(t, buf[:n])
		if m.GUID != guidA || !m.Found || len(m.CIDs) > pushCIDs {
			t.Fatalf("pushed %+v", m)
		}
		got = append(got, m.CIDs...)
	}
	if !slices.Equal(got, cids) {
		t.Fatalf("CIDs pushed %v", got)
	}
	if s.st.repliesPushed.Load() != 3 {
		t.Fatalf("%d pushes counted, want 3", s.st.repliesPushed.Load())
	}
}

// A push goes only to a client the access list admits now: a reload
// that refused the client after it started waiting (its waiters live
// on for up to WaitTTL) stops its pushes, as Reanswer's.
func TestPushAnswerFollowsClientAccess(t *testing.T) {
	ns := newNetns(t)
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true,
		ClientAllowed: func(a netip.Addr) bool { return !a.IsLoopback() }})
	to := netip.MustParseAddrPort("127.0.0.1:40000")
	s.PushAnswer(to, resolver.Group{Server: resolver.Endpoint{GUID: guidA, Addr: netip.MustParseAddrPort("127.0.0.1:5075"), Protocol: "tcp"}, CIDs: []uint32{1}, Offer: resolver.OfferTCP})
	if s.st.repliesPushed.Load() != 0 || s.st.dropDenied.Load() != 1 {
		t.Fatalf("pushed %d to a refused client (%d refusals counted), want none and 1", s.st.repliesPushed.Load(), s.st.dropDenied.Load())
	}
}
