package udpsearch

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/insight"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/internal/twin"
)

// benchName is a 30-character PV name, L=30 (38 per datagram:
// docs/protocol.md, "Packing search datagrams").
func benchName(prefix string, i int) string {
	return fmt.Sprintf("%s:C%02d-XX:Dev%07d}Val-I", prefix, i%30, i)
}

const benchHeld = 100_000

func benchResolvers(b *testing.B) map[string]Resolver {
	m := map[string]resolver.Endpoint{}
	names := make([]string, benchHeld)
	for i := range benchHeld {
		names[i] = benchName("HELD", i)
		m[names[i]] = srvA
	}
	reg := registry.New(registry.Options{})
	if _, err := reg.UpsertServer(registry.ServerInfo{GUID: srvA.GUID, Addr: srvA.Addr, Protocol: "tcp"}); err != nil {
		b.Fatal(err)
	}
	if err := reg.ReplaceNames(srvA.GUID, names, registry.SourceProbe); err != nil {
		b.Fatal(err)
	}
	res := resolver.New(reg, resolver.Options{})
	b.Cleanup(res.Close)
	return map[string]Resolver{"map": newMapResolver(m), "registry": res}
}

func search38(b *testing.B, flags uint8, prefix string) []byte {
	var names []string
	for i := range 38 {
		names = append(names, benchName(prefix, i*7919))
	}
	msg := searchMsg(flags, netip.Addr{}, 40000, []string{"tcp"}, names...)
	if len(msg) > 1400 {
		b.Fatalf("datagram %d bytes", len(msg))
	}
	return msg
}

func runHandle(b *testing.B, r Resolver, d datagram, wantReplies, wantForwards bool, setup ...func(*handler)) {
	out := &discardSender{}
	o := Options{AnswerNames: true, Resolver: r, GUID: ownGUID, TCPPort: 5075}
	if os.Getenv("PVANS_BENCH_INSIGHT") != "off" {
		// As in the daemon: every answered search is staged for insight,
		// digested in the background. PVANS_BENCH_INSIGHT=off measures
		// the same code without it (the before/after in PERFORMANCE.md).
		io := insight.Options{QueueBytes: insight.DefaultQueueBytes, DigestNamesPerSecond: insight.DefaultDigestNamesPerSecond,
			GUIDChangesPerHour: insight.DefaultGUIDChangesPerHour, Clients: insight.DefaultClients}
		c := config.Defaults()
		config.FillAtStart(&io, &c)
		in := insight.New(io)
		in.Start()
		b.Cleanup(in.Close)
		o.Insight = in
	}
	h, _ := testHandler(b, o, out)
	for _, f := range setup {
		f(h)
	}
	h.handle(&d) // warm the scratch buffers
	// Finish the setup's garbage collection now: a cycle still running in
	// the loop turns on write barriers in the decoder's stores and charges
	// its marking to whichever variant allocated more at setup (insight's
	// fixed summaries), which the daemon's steady state never sees.
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := testutil.StartThreadCPU()
	for b.Loop() {
		h.handle(&d)
	}
	b.ReportMetric(float64(cpu.Stop().Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "datagrams/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/38, "ns/name")
	if (out.replies > 0) != wantReplies || (out.forwards > 0) != wantForwards {
		b.Fatalf("replies %d forwards %d", out.replies, out.forwards)
	}
}

// The common case on a busy subnet: a broadcast search of 38 names pvans
// does not hold. Decode, one lookup per name, decide to stay silent.
func BenchmarkHandleSearch38NotHeld(b *testing.B) {
	d := datagram{src: netip.MustParseAddrPort("10.0.0.9:5555"), dst: ipEthBc, ifIndex: 2}
	for name, r := range benchResolvers(b) {
		b.Run(name, func(b *testing.B) {
			d.b = search38(b, 0, "MISS")
			runHandle(b, r, d, false, false)
		})
	}
}

// 38 held names: decode, lookup, encode and send one response.
func BenchmarkHandleSearch38Held(b *testing.B) {
	d := datagram{src: netip.MustParseAddrPort("10.0.0.9:5555"), dst: ipEthBc, ifIndex: 2}
	for name, r := range benchResolvers(b) {
		b.Run(name, func(b *testing.B) {
			var names []string
			for i := range 38 {
				names = append(names, benchName("HELD", i*2111))
			}
			d.b = searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, names...)
			runHandle(b, r, d, true, false)
		})
	}
}

// The same, from a client paired with its TCP name-server connection
// (package twin): fingerprint, the pairing's lookup, and the answer
// offered to the connection instead of the socket.
func BenchmarkHandleSearch38Paired(b *testing.B) {
	// From the socket its replies go to: only such a search pairs.
	d := datagram{src: netip.MustParseAddrPort("10.0.0.9:40000"), dst: ipEthBc, ifIndex: 2}
	r := benchResolvers(b)["registry"]
	var names []string
	for i := range 38 {
		names = append(names, benchName("HELD", i*2111))
	}
	d.b = searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, names...)
	tw := twin.New(nil, twin.Options{})
	var offered int
	c := tw.Join(d.src.Addr(), func([]byte) bool { offered++; return true })
	_, p, _, _ := pva.SplitMessage(d.b)
	fp, _ := tw.Fingerprint(p)
	tw.UDPSearch(netip.AddrPortFrom(d.src.Addr(), 40000), fp)
	c.TCPSearch(fp)
	runHandle(b, r, d, false, false, func(h *handler) { pairingOn(h, tw, true) })
	if offered == 0 {
		b.Fatal("nothing answered over the connection")
	}
}

// A unicast search to a local address: decode, build the forward and
// go on to the answer path (no resolver here, so no lookup).
func BenchmarkHandleForward38(b *testing.B) {
	d := datagram{src: netip.MustParseAddrPort("10.0.0.9:5555"), dst: ipEth, ifIndex: 2}
	d.b = search38(b, pva.SearchUnicast, "MISS")
	runHandle(b, nil, d, false, true)
}
