package tcpsearch

import (
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/insight"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/testutil"
)

// names38 registers 38 names of 30 characters (a full 1400-byte PVXS
// search) on three servers and returns the CMD_SEARCH that asks for them.
func names38(tb testing.TB, reg *registry.Registry) []byte {
	s := pva.Search{Seq: pva.SearchSeqFind, Flags: pva.SearchUnicast, Protocols: [][]byte{[]byte("tcp")}}
	per := map[int][]string{}
	for i := 0; i < 38; i++ {
		n := fmt.Sprintf("SR:C%02d-MG{PS:QH1}I:Sp1-SP:%04d", i, i)[:30]
		per[i%3] = append(per[i%3], n)
		s.Names = append(s.Names, pva.SearchName{CID: 0x12345678 + uint32(i), Name: []byte(n)})
	}
	for k, ns := range per {
		g := pva.GUID{byte(k + 1)}
		ep := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(k + 1)}), 5075)
		if _, err := reg.UpsertServer(registry.ServerInfo{GUID: g, Addr: ep, Protocol: "tcp"}); err != nil {
			tb.Fatal(err)
		}
		if err := reg.AddNames(g, ns, registry.SourceProbe); err != nil {
			tb.Fatal(err)
		}
	}
	msg := pva.AppendSearch(nil, pva.FlagBigEndian, &s)
	if len(msg) > pva.MaxSearchDatagram {
		tb.Fatalf("search of %d bytes", len(msg))
	}
	return msg
}

// BenchmarkAnswer38 is the in-process lookup+encode path for one 38-name
// search: decode, one resolver lookup, three CMD_SEARCH_RESPONSEs encoded.
func BenchmarkAnswer38(b *testing.B) {
	reg := registry.New(registry.Options{})
	res := resolver.New(reg, resolver.Options{})
	defer res.Close()
	msg := names38(b, reg)
	var o Options
	if os.Getenv("PVANS_BENCH_INSIGHT") != "off" { // as in the daemon; off: the same code without it
		in := insight.New(benchInsight())
		in.Start()
		defer in.Close()
		o.Insight = in
	}
	srv := New(o, FromResolver(res))
	ss := &session{s: srv}
	h, payload, _, err := pva.SplitMessage(msg)
	if err != nil {
		b.Fatal(err)
	}
	var out []byte
	b.ReportAllocs()
	b.ResetTimer()
	cpu := testutil.StartThreadCPU()
	for i := 0; i < b.N; i++ {
		if err := ss.search.Decode(payload, h.BigEndian()); err != nil {
			b.Fatal(err)
		}
		out = ss.answer(out[:0], &ss.search, payload, pva.FlagServer, 5075)
	}
	b.ReportMetric(float64(cpu.Stop().Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.StopTimer()
	if srv.cnt.claims.Load() != uint64(38*b.N) || len(ss.batch.Missing) != 0 {
		b.Fatalf("claims %d for %d searches", srv.cnt.claims.Load(), b.N)
	}
	b.ReportMetric(float64(38*b.N)/b.Elapsed().Seconds(), "claims/s")
}

// BenchmarkSocketPipelined38 sends 38-name searches back to back over one
// loopback connection and reads the replies (3 per search).
func BenchmarkSocketPipelined38(b *testing.B) {
	reg := registry.New(registry.Options{})
	res := resolver.New(reg, resolver.Options{})
	defer res.Close()
	msg := names38(b, reg)
	o := Options{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}}
	if os.Getenv("PVANS_BENCH_INSIGHT") != "off" {
		in := insight.New(benchInsight())
		in.Start()
		defer in.Close()
		o.Insight = in
	}
	srv := New(o, FromResolver(res))
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	nc := rawConn(b, srv.Addrs()[0])
	const batch = 64
	burst := make([]byte, 0, batch*len(msg))
	for i := 0; i < batch; i++ {
		burst = append(burst, msg...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() {
		for sent := 0; sent < b.N; sent += batch {
			n := min(batch, b.N-sent)
			if _, err := nc.Write(burst[:n*len(msg)]); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	buf := make([]byte, 64<<10)
	want, got, have := 3*b.N, 0, 0
	nc.SetReadDeadline(time.Now().Add(time.Minute))
	for got < want {
		n, err := nc.Read(buf[have:])
		if err != nil {
			b.Fatal(err)
		}
		have += n
		rest := buf[:have]
		for {
			_, _, r, err := pva.SplitMessage(rest)
			if err != nil {
				break
			}
			rest = r
			got++
		}
		have = copy(buf, rest)
	}
	b.StopTimer()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(38*b.N)/b.Elapsed().Seconds(), "claims/s")
}

// BenchmarkPushLatency measures from the registry commit of a waited name
// to the pushed reply read by the client.
func BenchmarkPushLatency(b *testing.B) {
	w := newWorld(b, Options{})
	nc := rawConn(b, w.ep)
	g := pva.GUID{0x77}
	// An endpoint of its own: the world's server A holds epA.
	ep := netip.MustParseAddrPort("10.1.2.9:5075")
	if _, err := w.reg.UpsertServer(registry.ServerInfo{GUID: g, Addr: ep, Protocol: "tcp"}); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("late:%d", i)
		s := pva.Search{Seq: 1, Names: []pva.SearchName{{CID: uint32(i), Name: []byte(name)}}}
		nc.Write(pva.AppendSearch(nil, pva.FlagBigEndian, &s))
		for w.res.Stats().Waiting == 0 {
			time.Sleep(10 * time.Microsecond)
		}
		start := time.Now()
		if err := w.reg.AddNames(g, []string{name}, registry.SourceSearchThrough); err != nil {
			b.Fatal(err)
		}
		if h, _ := readMsg(b, nc); h.Command != pva.CmdSearchResponse {
			b.Fatal(h)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/push")
}

// benchInsight: insight's options as the daemon builds them, from the
// production settings.
func benchInsight() insight.Options {
	o := insight.Options{QueueBytes: insight.DefaultQueueBytes, DigestNamesPerSecond: insight.DefaultDigestNamesPerSecond,
		GUIDChangesPerHour: insight.DefaultGUIDChangesPerHour, Clients: insight.DefaultClients}
	c := config.Defaults()
	config.FillAtStart(&o, &c)
	return o
}
