package relay

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
)

var guid = pva.GUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

func listen(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A beacon is relayed as a beacon, a discovery reply as a search response,
// each naming the server's own address (never "any"), to every
// destination; the rate bound and the relayable rule drop (counted).
func TestRelay(t *testing.T) {
	a, b := listen(t), listen(t)
	clk := clock.NewFake(time.Unix(0, 0))
	r := New(Options{Clock: clk})
	r.Apply(Limits{To: []netip.AddrPort{a.LocalAddr().(*net.UDPAddr).AddrPort(), b.LocalAddr().(*net.UDPAddr).AddrPort()}, PerSecond: 1, Burst: 2})
	if err := r.Open(); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ioc := netip.MustParseAddrPort("10.5.0.7:5075")
	r.Relay(beacon.Observation{GUID: guid, Endpoint: ioc, Protocol: "tcp", ChangeCount: 7, Via: beacon.ViaBeacon})
	r.Relay(beacon.Observation{GUID: guid, Endpoint: ioc, Protocol: "tcp", Via: beacon.ViaDiscovery})
	r.Relay(beacon.Observation{GUID: guid, Endpoint: ioc, Protocol: "tcp", Via: beacon.ViaBeacon}) // beyond the burst
	r.Relay(beacon.Observation{GUID: guid, Endpoint: netip.MustParseAddrPort("127.0.0.1:5075"), Protocol: "tcp"})
	r.Relay(beacon.Observation{GUID: pva.PvansGUID(guid), Endpoint: ioc, Protocol: "tcp"}) // another pvans
	for _, c := range []*net.UDPConn{a, b} {
		buf := make([]byte, 512)
		for i, want := range []pva.Command{pva.CmdBeacon, pva.CmdSearchResponse} {
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, _, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				t.Fatal(err)
			}
			h, payload, _, err := pva.SplitMessage(buf[:n])
			if err != nil || h.Command != want {
				t.Fatalf("datagram %d: %v %v", i, h.Command, err)
			}
			if want == pva.CmdBeacon {
				var m pva.Beacon
				if err := m.Decode(payload, h.BigEndian()); err != nil || m.GUID != guid || m.Addr.Addr() != ioc.Addr() || m.Port != 5075 || m.ChangeCount != 7 {
					t.Fatalf("beacon %+v %v", m, err)
				}
			} else {
				var m pva.SearchResponse
				if err := m.Decode(payload, h.BigEndian()); err != nil || m.Found || len(m.CIDs) != 0 || m.Addr.Addr() != ioc.Addr() || string(m.Protocol) != "tcp" {
					t.Fatalf("discovery reply %+v %v", m, err)
				}
			}
		}
	}
	st := r.Stats()
	if st.Relayed != 2 || st.Datagrams != 4 || st.Rate != 1 || st.NotRelayable != 1 {
		t.Errorf("stats %+v", st)
	}
	// The bound refills with time.
	clk.Advance(time.Second)
	r.Relay(beacon.Observation{GUID: guid, Endpoint: ioc, Protocol: "tcp"})
	if r.Stats().Relayed != 3 {
		t.Errorf("not relayed after a second: %+v", r.Stats())
	}
}

// BenchmarkRelay is a relay's CPU per beacon relayed to one central pvans
// (docs/PERFORMANCE.md, "A relay's cost").
func BenchmarkRelay(b *testing.B) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := c.ReadFromUDPAddrPort(buf); err != nil {
				return
			}
		}
	}()
	r := New(Options{})
	r.Apply(Limits{To: []netip.AddrPort{c.LocalAddr().(*net.UDPAddr).AddrPort()}})
	if err := r.Open(); err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	o := beacon.Observation{GUID: guid, Endpoint: netip.MustParseAddrPort("10.5.0.7:5075"), Protocol: "tcp", Via: beacon.ViaBeacon}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Relay(o)
	}
}
