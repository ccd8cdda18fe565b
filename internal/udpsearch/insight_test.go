package udpsearch

import (
	"net/netip"
	"testing"

	"github.com/pvans-project/pvans/internal/pva"
)

type seen struct {
	client netip.Addr
	names  int
	miss   int
}

type recObserver struct{ got []seen }

func (r *recObserver) Searched(client netip.Addr, tcp bool, payload []byte, names []pva.SearchName, missing []int, found int) {
	r.got = append(r.got, seen{client, len(names), len(missing)})
}

// Every answered search is told to insight with its client and unclaimed
// names, except pvans's own search-through searches (from its client
// socket's port on a local address), which are answered like anyone's.
func TestInsightSeesSearchesButNotOwn(t *testing.T) {
	ob := &recObserver{}
	out := &discardSender{}
	h, _ := testHandler(t, Options{AnswerNames: true, Resolver: newMapResolver(nil), GUID: ownGUID, TCPPort: 5075, Insight: ob}, out)
	h.ownClient[0] = 40123
	msg := searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, "a:missing", "b:missing")
	for _, src := range []string{"10.0.0.9:40123", "10.0.0.5:40123", "127.0.0.1:40123", "10.0.0.5:40124"} {
		h.handle(&datagram{b: msg, src: netip.MustParseAddrPort(src), dst: ipEthBc, ifIndex: 2})
	}
	if len(ob.got) != 2 || ob.got[0].client != netip.MustParseAddr("10.0.0.9") || ob.got[1].client != ipEth || ob.got[0].miss != 2 {
		t.Errorf("insight saw %+v; want 10.0.0.9 and 10.0.0.5:40124 only, 2 names missing each", ob.got)
	}
}
