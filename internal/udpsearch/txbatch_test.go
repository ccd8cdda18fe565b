//go:build linux

package udpsearch

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
)

// Many clients searching at once: their searches arrive in batches and
// the replies of a batch leave in one sendmmsg; each client still gets
// exactly its own answer, from the address it searched.
func TestBatchedRepliesReachEachClient(t *testing.T) {
	ns := newNetns(t)
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true,
		Resolver: newMapResolver(map[string]resolver.Endpoint{"pvans:held": srvX})})
	const n = 48
	clients := make([]*net.UDPConn, n)
	lo5076 := netip.MustParseAddrPort("127.0.0.1:5076")
	for i := range clients {
		clients[i] = udpIn(t, ns, "127.0.0.1:0")
	}
	for round := range 3 {
		for i, c := range clients {
			port := c.LocalAddr().(*net.UDPAddr).AddrPort().Port()
			m := &pva.Search{Seq: uint32(1000*round + i), Flags: pva.SearchUnicast, ReplyPort: port,
				Protocols: [][]byte{[]byte("tcp")}, Names: []pva.SearchName{{CID: uint32(i), Name: []byte("pvans:held")}}}
			if _, err := c.WriteToUDPAddrPort(pva.AppendSearch(nil, pva.FlagBigEndian, m), lo5076); err != nil {
				t.Fatal(err)
			}
		}
		buf := make([]byte, 2048)
		for i, c := range clients {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			k, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil || from != lo5076 {
				t.Fatalf("round %d client %d: no answer from %v (%v from %v)", round, i, lo5076, err, from)
			}
			_, r := decodeResponse(t, buf[:k])
			if r.Seq != uint32(1000*round+i) || len(r.CIDs) != 1 || r.CIDs[0] != uint32(i) || r.GUID != guidX {
				t.Fatalf("round %d client %d: answer %+v", round, i, r)
			}
		}
		for i, c := range clients {
			if extra := collect(c, 10*time.Millisecond, 0); len(extra) != 0 {
				t.Fatalf("round %d client %d: %d answers more", round, i, len(extra))
			}
		}
	}
	if s.st.responses.Load() != 3*n || s.st.sendErrors.Load() != 0 {
		t.Fatalf("stats %+v", metrics.Sprint(&s.st))
	}
}

// Queuing and sending a batch of replies allocates nothing.
func TestReplyBatchAllocatesNothing(t *testing.T) {
	ns := newNetns(t)
	var conn *net.UDPConn
	if err := ns.Do(func() (err error) { conn, err = listenSearchPort(5076, 1<<20); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := udpIn(t, ns, "127.0.0.1:0")
	setSockInt(t, client, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	to := client.LocalAddr().(*net.UDPAddr).AddrPort()
	st := &counters{}
	tx, err := newTxBatch(conn, st)
	if err != nil {
		t.Fatal(err)
	}
	msg := appendResponse(nil, guidA, 7, pva.AnyIPv4, 5075, "tcp", []uint32{1, 2, 3})
	allocs := testing.AllocsPerRun(100, func() {
		for range 3 {
			tx.add(msg, to, ipLo, 1)
		}
		tx.add(msg, to, netip.Addr{}, 0)
		tx.flush()
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per batch", allocs)
	}
	if got := collect(client, 200*time.Millisecond, 0); len(got) < 400 || st.sendErrors.Load() != 0 {
		t.Fatalf("%d replies arrived (want 404), %d send errors", len(got), st.sendErrors.Load())
	}
}
