//go:build linux

package daemon

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/testutil"
)

// BenchmarkRelaySubnet is a relay's cost (docs/PERFORMANCE.md, "A relay's
// cost"): pvans in the relay profile hears the beacons of 1,000 IOCs on
// its port and relays each to one central instance. Every beacon takes
// the whole path: the kernel, the UDP participant (decode, hint rules,
// beacon budget), the sighting queue, the relay's bound and its send.
//
// A relay passes on only what it heard first hand, from the address a
// beacon names, and never a loopback address. So the benchmark runs in a
// network namespace of its own (root needed; skipped otherwise) where
// 10.0.0.0/15 is local: each IOC beacons from its own address 10.n.x.y,
// a distinct server and a distinct beacon-budget entry, as 1,000 IOCs on
// a subnet are.
//
// Reported: heap held for 1,000 IOCs (after a GC, beyond the idle relay),
// and process CPU per beacon relayed (user + system, the benchmark's own
// sendto of the beacon included).
func BenchmarkRelaySubnet(b *testing.B) {
	const iocs = 1000
	testutil.RequireNetns(b, "BenchmarkRelaySubnet")
	ns := testutil.NewNetns(b, fmt.Sprintf("pvans-d%d-%d", os.Getpid(), nsSeq.Add(1)))
	ns.IP(b, "route add local 10.0.0.0/15 dev lo")
	var sink *net.UDPConn
	if err := ns.Do(func() (err error) {
		sink, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		return
	}); err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	var got atomic.Uint64
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := sink.ReadFromUDPAddrPort(buf); err != nil {
				return
			}
			got.Add(1)
		}
	}()

	c := config.Loopback(5075, 5076) // the namespace's own ports
	c.HTTP.Listen = ""
	c.PVA.AddrList = nil
	c.Search.DiscoveryAtStart = false
	c.Relay.Only = true
	c.Relay.To = []config.Endpoint{config.EndpointOf(sink.LocalAddr().(*net.UDPAddr).AddrPort())}
	c.Access.ServerAllow = nil
	// The default beacon budget per IOC (20/s, burst 200) stays: its
	// table is part of what 1,000 IOCs cost. b.N up to 200,000 beacons
	// over 1,000 IOCs stays within the burst.
	var d *Daemon
	if err := ns.Do(func() (err error) {
		if d, err = New(&c, Options{Logger: zap.NewNop(), TestBounds: func(b *Bounds) { b.RelayPerSecond = 0 }}); err != nil {
			return err
		}
		return d.Start()
	}); err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	dst := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), d.UDP.LocalAddr().Port())

	// subnet is 1,000 IOCs on 10.net.0.0/16: each one's beacon, sent
	// from a socket on its own address.
	type ioc struct {
		beacon []byte
		conn   *net.UDPConn
	}
	subnet := func(net_ byte) []ioc {
		out := make([]ioc, iocs)
		for i := range out {
			ip := netip.AddrFrom4([4]byte{10, net_, byte((i + 1) >> 8), byte(i + 1)})
			out[i].beacon = pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer, &pva.Beacon{
				GUID: pva.GUID{0xAB, net_, byte(i >> 8), byte(i)}, Addr: pva.AddressFrom(ip), Port: 5075, Protocol: "tcp"})
			if err := ns.Do(func() (err error) {
				out[i].conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 0)))
				return
			}); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { out[i].conn.Close() })
		}
		return out
	}
	// Both subnets' sockets are made before the heap is read: they are
	// the benchmark's, not the relay's.
	beacons, more := subnet(0), subnet(1)
	// send sends n beacons round the IOCs, in batches the relay keeps up
	// with (no loss in the kernel's buffers), and returns how many were
	// relayed.
	sent := 0
	send := func(n int) {
		const batch = 256
		for k := 0; k < n; k += batch {
			m := min(batch, n-k)
			for j := 0; j < m; j++ {
				c := beacons[sent%iocs]
				if _, err := c.conn.WriteToUDPAddrPort(c.beacon, dst); err != nil {
					b.Fatal(err)
				}
				sent++
			}
			deadline := time.Now().Add(5 * time.Second)
			for got.Load() < uint64(sent) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Microsecond) // not a spin: CPU is measured
			}
		}
	}

	var m0, m1 runtime.MemStats
	send(iocs) // warm up: every IOC heard once
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m0)
	beacons = more // 1,000 IOCs more
	send(iocs)
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if got.Load() < 2*iocs {
		b.Fatalf("%d of %d first beacons relayed", got.Load(), 2*iocs)
	}

	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	before := got.Load()
	b.ResetTimer()
	send(b.N)
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	relayed := got.Load() - before
	cpu := time.Duration(r1.Utime.Nano()+r1.Stime.Nano()-r0.Utime.Nano()-r0.Stime.Nano()) * time.Nanosecond
	if relayed > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(relayed), "cpu-ns/relayed")
	}
	b.ReportMetric(float64(relayed)/float64(b.N), "relayed/beacon")
	b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/1024, "heap-KiB/1000-IOCs")
}
