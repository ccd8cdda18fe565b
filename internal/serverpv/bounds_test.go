package serverpv

import (
	"io"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/tcpsearch"
)

// rpcInitDefining is an RPC INIT whose pvRequest defines cache key key as
// a structure of n empty structures (about 5 bytes each on the wire, n+1
// descriptors in memory).
func rpcInitDefining(sid, ioid uint32, key uint16, n int) []byte {
	w := pva.Writer{BE: true}
	w.U32(sid)
	w.U32(ioid)
	w.U8(pva.SubcmdInit)
	w.U8(0xFD)
	w.U16(key)
	w.U8(byte(pva.TypeStruct))
	w.String("")
	w.Size(n)
	for i := 0; i < n; i++ {
		w.String(string(rune('a'+i%26)) + string(rune('a'+i/26%26)))
		w.U8(byte(pva.TypeStruct))
		w.String("")
		w.Size(0)
	}
	return pva.AppendMessage(nil, pva.FlagBigEndian, pva.CmdRPC, w.B)
}

func readN(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	return b
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestTypeCacheBoundedPerConnection is the issue-14 row "one TCP
// connection opens the server PV and sends 1,200 RPC INITs, each defining
// a new cached type (16,000-member struct)": +2.8 GB from 115 MB sent.
// The connection's cache keeps at most TypesPerConn types of
// TypeBytesPerConn expanded bytes; the rest are refused and counted, and
// the heap does not grow with what was sent.
func TestTypeCacheBoundedPerConnection(t *testing.T) {
	reg := registry.New(registry.Options{})
	defer reg.Close()
	res := resolver.New(reg, resolver.Options{})
	defer res.Close()
	// The production bounds, as the daemon passes them.
	lim := Limits{TypesPerConn: DefaultTypesPerConn, TypeBytesPerConn: DefaultTypeBytesPerConn, TypeBytesTotal: DefaultTypeBytesTotal}
	if lim.TypesPerConn <= 0 || lim.TypeBytesPerConn <= 0 || lim.TypeBytesTotal <= 0 {
		t.Fatalf("production limits %+v", lim)
	}
	prov := New("pvans test", lim)
	srv := tcpsearch.New(tcpsearch.Options{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")},
		Channels: prov}, tcpsearch.FromResolver(res))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readN(t, c, 36)
	c.Write(pva.AppendClientValidation(nil, 0, &pva.ClientValidation{AuthMethod: "anonymous"}))
	readN(t, c, 9)
	c.Write(pva.AppendCreateChannel(nil, pva.FlagBigEndian, &pva.CreateChannel{Channels: []pva.ChannelRequest{{CID: 1, Name: Name}}}))
	h, err := pva.DecodeHeader(readN(t, c, 8))
	if err != nil {
		t.Fatal(err)
	}
	var rep pva.CreateChannelReply
	if err := rep.Decode(readN(t, c, int(h.Size)), h.BigEndian()); err != nil || !rep.Status.OK() {
		t.Fatalf("create server channel: %v %+v", err, rep)
	}
	before := heapInUse()
	const inits, members = 300, 12000 // 300 × ~60 KB sent
	sent := 0
	for i := 0; i < inits; i++ {
		m := rpcInitDefining(rep.SID, uint32(i+1), uint16(i), members)
		sent += len(m)
		if _, err := c.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	// The last INIT's type is refused like the others: wait until the
	// provider has seen them all.
	deadline := time.Now().Add(30 * time.Second)
	for prov.refused.Load() < inits && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	st := prov.Stats()
	grown := int64(heapInUse()) - int64(before)
	t.Logf("sent %d bytes; heap grew %d bytes; %+v, %d refused", sent, grown, st, prov.refused.Load())
	if prov.refused.Load() != inits || st.CachedTypeBytes > int64(lim.TypeBytesPerConn) || st.CachedTypes > lim.TypesPerConn {
		t.Fatalf("cache after %d oversized definitions: %+v", inits, st)
	}
	// Old code kept every type: 300 × 12,001 descriptors ≈ 400 MB.
	if grown > 32<<20 {
		t.Fatalf("heap grew %d bytes after %d bytes of type definitions; want it bounded", grown, sent)
	}
	// Small definitions (pvlist's) are still cached, up to the count bound.
	for i := 0; i < lim.TypesPerConn+10; i++ {
		c.Write(rpcInitDefining(rep.SID, uint32(1000+i), uint16(1000+i), 2))
	}
	deadline = time.Now().Add(10 * time.Second)
	for prov.refused.Load() < inits+10 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if st := prov.Stats(); st.CachedTypes != lim.TypesPerConn || prov.refused.Load() != inits+10 {
		t.Fatalf("small definitions: %+v", st)
	}
	c.Close()
	deadline = time.Now().Add(5 * time.Second)
	for prov.Stats().CachedTypeBytes != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if st := prov.Stats(); st.CachedTypeBytes != 0 {
		t.Fatalf("closed connection's share not given back: %+v", st)
	}
}
