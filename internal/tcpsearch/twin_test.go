package tcpsearch

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/twin"
)

// A connection joins the pairing from its start, its searches are
// fingerprinted as its client's UDP copies are, an answer to the paired
// socket arrives on the connection, and the pair ends with it.
func TestConnectionPairsWithItsClientsSocket(t *testing.T) {
	tw := twin.New(nil, twin.Options{})
	w := newWorld(t, Options{Twins: tw})
	cl := dial(t, w.ep)
	udp := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 40001)
	// The client's UDP copy of the search it is about to send over TCP:
	// its own response port, no unicast flag, and PVXS's sequence (a
	// search in another form cannot pair: twin.Fingerprint).
	s := pva.Search{Seq: pva.SearchSeqFind, ReplyPort: udp.Port(), Protocols: [][]byte{[]byte("tcp")},
		Names: []pva.SearchName{{CID: 100, Name: []byte("cap:a:mbox1")}}}
	_, p, _, _ := pva.SplitMessage(pva.AppendSearch(nil, pva.FlagBigEndian, &s))
	fp, _ := tw.Fingerprint(p)
	deadline := time.Now().Add(5 * time.Second)
	for tw.Stats().Conns == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if c, cand := tw.UDPSearch(udp, fp); c != nil || !cand {
		t.Fatal("the connection did not join at its start")
	}
	cl.search(pva.SearchSeqFind, 0, "cap:a:mbox1")
	if r := cl.next(t, 5*time.Second); len(r.m.CIDs) != 1 {
		t.Fatalf("%+v", r.m)
	}
	c, _ := tw.UDPSearch(udp, fp)
	if c == nil {
		t.Fatal("the same search over the connection did not pair it with the socket")
	}
	answer := pva.AppendSearchResponse(nil, pva.FlagBigEndian|pva.FlagServer, &pva.SearchResponse{GUID: guidA, Seq: pva.SearchSeqFind,
		Addr: pva.AnyIPv4, Port: 5075, Protocol: []byte("tcp"), Found: true, CIDs: []uint32{100}})
	if !c.Send(answer) {
		t.Fatal("offer refused")
	}
	if r := cl.next(t, 5*time.Second); r.m.GUID != guidA || len(r.m.CIDs) != 1 || r.m.CIDs[0] != 100 {
		t.Fatalf("the answer offered to the pair did not arrive: %+v", r.m)
	}
	cl.c.Close()
	<-cl.c.Done()
	for tw.Stats().Conns != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	m := metrics.New("test")
	tw.RegisterMetrics(m)
	if st := tw.Stats(); st.Conns != 0 || st.Paired != 0 {
		t.Fatalf("the pair outlived its connection: %+v", st)
	}
	if ended, err := m.Value("pvans_twin_pairs_ended_total"); ended != 1 {
		t.Fatalf("pairs ended %v, %v; want 1", ended, err)
	}
}
