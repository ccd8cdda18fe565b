//go:build linux

package udpsearch

import (
	"net"

	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/testutil"
)

// The receive table has a search port row and a client row per open
// family, each on its own socket with its own kernel drop counter; only
// the IPv4 search port's replies wait for one sendmmsg per receive batch
// (the queue takes IPv4 replies only).
func TestReceiversTable(t *testing.T) {
	s := New(Options{Port: testutil.FreeUDPPort(t), IPv6: true, Batch: 8, InterfaceRefresh: -1})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v4, v6 := s.fam[ip4], s.fam[ip6]
	type want struct {
		batch int
		flush *sockSender
		drops *metrics.Counter
	}
	wants := map[*net.UDPConn]want{
		v4.search: {8, v4.batch, &s.st.kernelDrops},
		v4.client: {clientBatch, nil, &s.st.clientKernelDrops},
	}
	if v6.search != nil {
		wants[v6.search] = want{8, nil, &s.st.kernelDrops}
		wants[v6.client] = want{clientBatch, nil, &s.st.clientKernelDrops}
	} else {
		t.Log("no IPv6 here: IPv4 rows only")
	}
	if v4.batch == nil {
		t.Fatal("the IPv4 search port does not batch its replies")
	}
	rows := s.receivers()
	if len(rows) != len(wants) {
		t.Fatalf("%d rows, want %d", len(rows), len(wants))
	}
	for i, r := range rows {
		w, ok := wants[r.conn]
		if !ok {
			t.Fatalf("row %d: socket %v is no receiving socket, or a row repeats it", i, r.conn.LocalAddr())
		}
		delete(wants, r.conn)
		if r.batch != w.batch || r.flush != w.flush || r.drops != w.drops || r.handle == nil {
			t.Errorf("row %d (%v): batch %d flush %p drops %p; want %d, %p, %p",
				i, r.conn.LocalAddr(), r.batch, r.flush, r.drops, w.batch, w.flush, w.drops)
		}
	}
}
