package udpsearch

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
)

// stuckSink is a tracker whose every sighting waits for a lock someone else
// holds — the registry's writer lock during a long listing, which once held
// a UDP search's answer for 22.7 s.
type stuckSink struct {
	release chan struct{}
	got     atomic.Int64
}

func (s *stuckSink) Observe(beacon.Observation) {
	s.got.Add(1)
	<-s.release
}

// TestBeaconsNeverBlockSearches: sightings reach the tracker through a
// bounded queue, so a tracker (or the registry write behind it) that does
// not return never stalls the receive goroutine: searches keep being
// answered while it is stuck (a stalled receive goroutine would answer
// none until it returns, which it never does here; their times are
// logged), and sightings beyond the queue are dropped and counted
// instead of piling up.
func TestBeaconsNeverBlockSearches(t *testing.T) {
	ns := newNetns(t)
	sink := &stuckSink{release: make(chan struct{})}
	defer close(sink.release)
	const queue = 64
	s := startServer(t, ns, Options{GUID: ownGUID, TCPPort: 5075, AnswerNames: true, Beacons: sink, BeaconQueue: queue,
		Resolver: newMapResolver(map[string]resolver.Endpoint{"pvans:held": srvX})})
	to := netip.MustParseAddrPort("127.0.0.1:5076")
	beaconer := udpIn(t, ns, "127.0.0.1:0")
	const beacons = 2000
	for i := 0; i < beacons; i++ {
		g := pva.GUID{0xBE, byte(i >> 8), byte(i)}
		beaconer.WriteToUDPAddrPort(pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer,
			&pva.Beacon{GUID: g, Addr: pva.AnyIPv4, Port: uint16(6000 + i), Protocol: "tcp"}), to)
	}
	client := udpIn(t, ns, "127.0.0.1:0")
	port := client.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	search := searchMsg(pva.SearchUnicast, netip.Addr{}, port, []string{"tcp"}, "pvans:held")
	var lat []time.Duration
	buf := make([]byte, 65536)
	for i := 0; i < 40; i++ {
		start := time.Now()
		client.WriteToUDPAddrPort(search, to)
		client.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang guard
		for {
			n, _, err := client.ReadFromUDPAddrPort(buf)
			if err != nil {
				t.Fatalf("search %d not answered while the tracker is stuck (%d sightings delivered): %v", i, sink.got.Load(), err)
			}
			if _, rsp := decodeResponse(t, buf[:n]); rsp.GUID == guidX {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	slices := append([]time.Duration(nil), lat...)
	sortDurations(slices)
	t.Logf("search answer p95 %v while the tracker is stuck", slices[len(slices)*95/100])
	if s.st.dropBeaconQueue.Load() == 0 || s.st.dropBeaconQueue.Load() > beacons || sink.got.Load() != 1 {
		t.Fatalf("queue drops %d, delivered %d; want the overflow dropped and counted with one sighting stuck in delivery", s.st.dropBeaconQueue.Load(), sink.got.Load())
	}
	if queued := int(s.st.beacons.Load()) - int(s.st.dropBeaconQueue.Load()) - 1; queued > queue {
		t.Fatalf("%d sightings queued, bound %d", queued, queue)
	}
}

func sortDurations(d []time.Duration) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j] < d[j-1]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}
