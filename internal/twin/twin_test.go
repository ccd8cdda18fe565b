package twin

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
)

// search is a CMD_SEARCH payload as a PVXS client builds it: flags and
// the response port as given, then one name per cid.
func search(flags uint8, port uint16, cids ...uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0x66696e64)
	b = append(b, flags, 0, 0, 0)
	b = append(b, make([]byte, 16)...)
	b = binary.BigEndian.AppendUint16(b, port)
	b = append(b, 1, 3, 't', 'c', 'p')
	b = binary.BigEndian.AppendUint16(b, uint16(len(cids)))
	for _, c := range cids {
		b = binary.BigEndian.AppendUint32(b, c)
		b = append(b, 4, 'p', 'v', byte('0'+c%10), byte('0'+c/10%10))
	}
	return b
}

var (
	hostA = netip.MustParseAddr("10.0.0.2")
	hostB = netip.MustParseAddr("10.0.0.3")
	portA = netip.AddrPortFrom(hostA, 40001)
)

// maxRecentTotal is the production bound over all hosts.
var maxRecentTotal = DefaultFingerprints

func newTable() (*Table, *clock.Fake) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	return New(clk, Options{Fingerprints: maxRecentTotal}), clk
}

type sink struct{ got [][]byte }

func (s *sink) offer(b []byte) bool { s.got = append(s.got, b); return true }

func fp(t *testing.T, tb *Table, p []byte) uint64 {
	t.Helper()
	f, ok := tb.Fingerprint(p)
	if !ok {
		t.Fatal("no fingerprint")
	}
	return f
}

func TestFingerprintIgnoresOnlyFlagsAndPort(t *testing.T) {
	tb, _ := newTable()
	if tb.Active() {
		t.Fatal("no connection open: nothing could pair")
	}
	c := tb.Join(hostB, (&sink{}).offer)
	if !tb.Active() {
		t.Fatal("a connection is open")
	}
	udp := fp(t, tb, search(0x80, 40001, 1, 2, 3))
	if tcp := fp(t, tb, search(0x81, 0, 1, 2, 3)); tcp != udp {
		t.Fatal("the TCP copy (unicast flag, port zeroed) must have the UDP copy's fingerprint")
	}
	if other := fp(t, tb, search(0x80, 40001, 1, 2, 4)); other == udp {
		t.Fatal("another CID list must not share the fingerprint")
	}
	p := search(0x80, 40001, 1)
	p[8] = 1 // the response address
	if fp(t, tb, p) == udp {
		t.Fatal("the response address is part of the fingerprint")
	}
	if _, ok := tb.Fingerprint(make([]byte, 25)); ok {
		t.Fatal("a payload shorter than a search's fixed part has no fingerprint")
	}
	c.Leave()
	if tb.Active() {
		t.Fatal("the last connection gone: nothing could pair")
	}
}

func TestPairsWhicheverCopyComesSecond(t *testing.T) {
	for _, udpFirst := range []bool{true, false} {
		tb, _ := newTable()
		var s sink
		var pairs []netip.AddrPort
		tb.OnPair(func(to netip.AddrPort, c *Conn) { pairs = append(pairs, to) })
		c := tb.Join(hostA, s.offer)
		f := fp(t, tb, search(0, 40001, 7, 8))
		if udpFirst {
			if c0, cand := tb.UDPSearch(portA, f); c0 != nil || !cand {
				t.Fatal("paired before the TCP copy came, or no candidate")
			}
			c.TCPSearch(f)
		} else {
			c.TCPSearch(f)
			if got, _ := tb.UDPSearch(portA, f); got != c {
				t.Fatal("the UDP copy after the TCP copy must pair at once")
			}
		}
		if got, _ := tb.UDPSearch(portA, 12345); got != c {
			t.Fatalf("udpFirst=%v: a paired socket's next search must find its connection", udpFirst)
		}
		if len(pairs) != 1 || pairs[0] != portA {
			t.Fatalf("OnPair calls %v", pairs)
		}
		if !c.Send([]byte("x")) || len(s.got) != 1 {
			t.Fatal("Send must offer to the connection")
		}
		c.Leave()
		if c0, _ := tb.UDPSearch(portA, 12345); c0 != nil {
			t.Fatal("a pair must end with its connection")
		}
		if st := tb.Stats(); st.Conns != 0 || st.Paired != 0 || tb.total != 0 || len(tb.hosts) != 0 {
			t.Fatalf("after Leave: %+v total=%d hosts=%d", st, tb.total, len(tb.hosts))
		}
	}
}

func TestNoPairAcrossHosts(t *testing.T) {
	tb, _ := newTable()
	c := tb.Join(hostB, (&sink{}).offer)
	f := fp(t, tb, search(0, 40001, 1))
	c.TCPSearch(f)
	if c0, _ := tb.UDPSearch(portA, f); c0 != nil {
		t.Fatal("a socket on host A paired with a connection from host B")
	}
	tb.Join(hostA, (&sink{}).offer)
	tb.UDPSearch(portA, f)
	c.TCPSearch(f)
	if tb.cnt.Paired.Load() != 0 {
		t.Fatal("paired across hosts")
	}
}

func TestNoRecordWithoutConnection(t *testing.T) {
	tb, _ := newTable()
	if _, cand := tb.UDPSearch(portA, 1); cand {
		t.Fatal("a host with no connection is no candidate")
	}
	tb.Join(hostB, (&sink{}).offer)
	if _, cand := tb.UDPSearch(portA, 1); cand {
		t.Fatal("a host with no connection is no candidate")
	}
	if tb.total != 0 || len(tb.hosts) != 1 {
		t.Fatal("a host with no connection must cost nothing")
	}
}

// Two processes of one host that send the same bytes (the same channels
// created in the same order) cannot be told apart: neither is paired.
func TestSameBytesFromTwoSocketsPairNothing(t *testing.T) {
	tb, _ := newTable()
	c := tb.Join(hostA, (&sink{}).offer)
	f := fp(t, tb, search(0, 40001, 1))
	tb.UDPSearch(portA, f)
	tb.UDPSearch(netip.AddrPortFrom(hostA, 40002), f)
	c.TCPSearch(f)
	if tb.cnt.Paired.Load() != 0 || tb.cnt.Ambiguous.Load() != 1 {
		t.Fatalf("%+v", metrics.Sprint(&tb.cnt))
	}
}

func TestSameBytesOverTwoConnectionsPairNothing(t *testing.T) {
	tb, _ := newTable()
	c1 := tb.Join(hostA, (&sink{}).offer)
	c2 := tb.Join(hostA, (&sink{}).offer)
	f := fp(t, tb, search(0, 40001, 1))
	c1.TCPSearch(f)
	c2.TCPSearch(f)
	if c0, _ := tb.UDPSearch(portA, f); c0 != nil {
		t.Fatal("paired with one of two connections that sent the same bytes")
	}
}

// A socket paired with one connection whose searches then show up on
// another is unpaired, and stays so while the dispute lasts.
func TestContestedSocketIsUnpaired(t *testing.T) {
	tb, clk := newTable()
	c1 := tb.Join(hostA, (&sink{}).offer)
	c2 := tb.Join(hostA, (&sink{}).offer)
	f1 := fp(t, tb, search(0, 40001, 1))
	tb.UDPSearch(portA, f1)
	c1.TCPSearch(f1)
	if got, _ := tb.UDPSearch(portA, 99); got != c1 {
		t.Fatal("not paired with c1")
	}
	// A new message's UDP copy is not recorded while paired, so the
	// dispute shows when c2's copy comes first.
	f2 := fp(t, tb, search(0, 40001, 2))
	c2.TCPSearch(f2)
	if c0, cand := tb.UDPSearch(portA, f2); c0 != nil || cand {
		t.Fatal("a socket shown on two connections must be unpaired, and no candidate")
	}
	f3 := fp(t, tb, search(0, 40001, 3))
	tb.UDPSearch(portA, f3)
	c1.TCPSearch(f3)
	if c0, _ := tb.UDPSearch(portA, 99); c0 != nil {
		t.Fatal("paired again while contested")
	}
	clk.Advance(contestedFor + time.Second)
	f4 := fp(t, tb, search(0, 40001, 4))
	tb.UDPSearch(portA, f4)
	c1.TCPSearch(f4)
	if got, _ := tb.UDPSearch(portA, 99); got != c1 {
		t.Fatal("not paired again after the dispute expired")
	}
}

func TestAtMostTwoSocketsPerConnection(t *testing.T) {
	tb, _ := newTable()
	c := tb.Join(hostA, (&sink{}).offer)
	for i := range 3 {
		f := fp(t, tb, search(0, 0, uint32(i)))
		tb.UDPSearch(netip.AddrPortFrom(hostA, uint16(40001+i)), f)
		c.TCPSearch(f)
	}
	if st := tb.Stats(); st.Paired != maxPortsPerConn {
		t.Fatalf("paired %d sockets to one connection", st.Paired)
	}
}

func TestFingerprintsExpire(t *testing.T) {
	tb, clk := newTable()
	c := tb.Join(hostA, (&sink{}).offer)
	f := fp(t, tb, search(0, 40001, 1))
	tb.UDPSearch(portA, f)
	clk.Advance(recentFor + time.Millisecond)
	c.TCPSearch(f)
	if tb.cnt.Paired.Load() != 0 {
		t.Fatal("paired with a fingerprint older than recentFor")
	}
}

// A flood of distinct searches keeps the earliest maxRecent per host and
// maxRecentTotal in all, and a later twin of an early message still pairs.
func TestRecentIsBounded(t *testing.T) {
	tb, clk := newTable()
	c := tb.Join(hostA, (&sink{}).offer)
	first := fp(t, tb, search(0, 40001, 1))
	tb.UDPSearch(portA, first)
	for i := range 10 * maxRecent {
		tb.UDPSearch(netip.AddrPortFrom(hostA, uint16(1000+i%50)), uint64(i)*7919+3)
	}
	if n := len(tb.hosts[hostA].udp.order); n != maxRecent || tb.total != maxRecent {
		t.Fatalf("kept %d (total %d), want %d", n, tb.total, maxRecent)
	}
	if tb.cnt.RecentFull.Load() == 0 {
		t.Fatal("refusals not counted")
	}
	c.TCPSearch(first)
	if got, _ := tb.UDPSearch(portA, 5); got != c {
		t.Fatal("the first message of the burst did not pair")
	}
	// Over many hosts, the total bound holds.
	for h := range maxRecentTotal/maxRecent + 10 {
		a := netip.AddrFrom4([4]byte{10, 1, byte(h >> 8), byte(h)})
		tb.Join(a, (&sink{}).offer)
		for i := range maxRecent {
			tb.UDPSearch(netip.AddrPortFrom(a, 1), uint64(h*maxRecent+i))
		}
	}
	if tb.total > maxRecentTotal {
		t.Fatalf("total %d > %d", tb.total, maxRecentTotal)
	}
	// Expired entries make room again.
	clk.Advance(recentFor + time.Millisecond)
	tb.UDPSearch(netip.AddrPortFrom(hostA, 2), 424242)
	if _, ok := tb.hosts[hostA].udp.m[424242]; !ok {
		t.Fatal("no room after expiry")
	}
}

// contestedOf is how many disputes are remembered for the sockets of a.
func contestedOf(tb *Table, a netip.Addr) int {
	if h := tb.hosts[a]; h != nil {
		return len(h.contested)
	}
	return 0
}

// A host with two connections that disputes reply port after reply port
// (one UDP search and its copy over each connection, the reply port any
// number it likes) must not make the disputes remembered grow with the
// ports: 65,535 per address, for every address that keeps a connection.
func TestContestedIsBounded(t *testing.T) {
	tb, clk := newTable()
	c1 := tb.Join(hostA, (&sink{}).offer)
	c2 := tb.Join(hostA, (&sink{}).offer)
	for i := range 5000 {
		to := netip.AddrPortFrom(hostA, uint16(1000+i))
		f := uint64(i)*7919 + 11
		tb.UDPSearch(to, f)
		c1.TCPSearch(f)
		c2.TCPSearch(f)
		if i%100 == 99 {
			clk.Advance(recentFor / 2)
		}
	}
	if n := contestedOf(tb, hostA); n > maxContested {
		t.Fatalf("%d disputes remembered for one host, want at most %d", n, maxContested)
	}
	// Expired disputes make room: a socket shown on two connections is
	// again kept unpaired.
	clk.Advance(contestedFor)
	to := netip.AddrPortFrom(hostA, 999)
	f := uint64(424242)
	tb.UDPSearch(to, f)
	c1.TCPSearch(f)
	c2.TCPSearch(f)
	if c, cand := tb.UDPSearch(to, 5); c != nil || cand {
		t.Fatal("the socket of the latest dispute is paired or a candidate")
	}
}

// Fingerprints of hosts that searched once and then kept their connections
// quiet (every client whose channels are all connected) expire: they must
// not hold the total bound and refuse the searches of every new host.
func TestIdleHostsDoNotHoldTheTotal(t *testing.T) {
	tb, clk := newTable()
	for h := range maxRecentTotal / maxRecent {
		a := netip.AddrFrom4([4]byte{10, 1, byte(h >> 8), byte(h)})
		tb.Join(a, (&sink{}).offer)
		for i := range maxRecent {
			tb.UDPSearch(netip.AddrPortFrom(a, 1), uint64(h*maxRecent+i))
		}
	}
	clk.Advance(recentFor + time.Second)
	c := tb.Join(hostA, (&sink{}).offer)
	f := fp(t, tb, search(0, 40001, 1))
	tb.UDPSearch(portA, f)
	c.TCPSearch(f)
	if got, _ := tb.UDPSearch(portA, 5); got != c {
		t.Fatalf("a new host not paired while idle hosts' expired fingerprints fill the total: %+v", metrics.Sprint(&tb.cnt))
	}
}

// The same bytes over two connections pair nothing, whichever order the
// copies come in: when another connection's copy came first (a process
// of the client's host that predicted the search; a PVXS client's search
// bytes follow from the channels it creates) and the client's socket was
// paired with it, the client's own copy ends that pair.
func TestSameBytesOverTwoConnectionsUnpairLate(t *testing.T) {
	tb, _ := newTable()
	intruder := tb.Join(hostA, (&sink{}).offer)
	own := tb.Join(hostA, (&sink{}).offer)
	f := fp(t, tb, search(0, 40001, 1))
	intruder.TCPSearch(f)
	if got, _ := tb.UDPSearch(portA, f); got != intruder {
		t.Fatal("setup: the socket did not pair with the first connection")
	}
	own.TCPSearch(f)
	if got, cand := tb.UDPSearch(portA, 5); got != nil || cand {
		t.Fatalf("the socket stays paired with a connection whose search another connection also sent (got %v, candidate %v)", got == intruder, cand)
	}
}

// The same for two sockets: a socket paired by a search that another
// socket of the host then sends too is unpaired.
func TestSameBytesFromTwoSocketsUnpairLate(t *testing.T) {
	tb, _ := newTable()
	c := tb.Join(hostA, (&sink{}).offer)
	other := netip.AddrPortFrom(hostA, 40002)
	f := fp(t, tb, search(0, 40001, 1))
	tb.UDPSearch(other, f)
	c.TCPSearch(f)
	if got, _ := tb.UDPSearch(other, 5); got != c {
		t.Fatal("setup: not paired")
	}
	tb.UDPSearch(portA, f)
	if got, _ := tb.UDPSearch(other, 6); got != nil {
		t.Fatal("a socket stays paired by a search another socket of its host also sent")
	}
	if got, _ := tb.UDPSearch(portA, 7); got != nil {
		t.Fatal("the second socket paired")
	}
}

// javaSearch is a CMD_SEARCH payload as a Phoebus (core-pva) client
// builds it: its search bucket as the sequence over UDP, "look" over TCP
// ("kool" when the connection is little endian).
func javaSearch(seq []byte, port uint16, cids ...uint32) []byte {
	b := search(0, port, cids...)
	copy(b, seq)
	return b
}

// A client whose searches cannot pair (a Phoebus client: its UDP and TCP
// copies carry different sequences) takes no pairing memory however much
// it searches, so the fingerprints of a PVXS client on another host still
// find room and pair.
func TestSearchesThatCannotPairTakeNoMemory(t *testing.T) {
	tb := New(clock.NewFake(time.Unix(1e9, 0)), Options{Fingerprints: 200})
	var s sink
	java := tb.Join(hostB, s.offer)
	for i := range 1000 {
		bucket := binary.BigEndian.AppendUint32(nil, uint32(i%34))
		if f, ok := tb.Fingerprint(javaSearch(bucket, 40002, uint32(i))); ok {
			tb.UDPSearch(netip.AddrPortFrom(hostB, 40002), f)
		}
		for _, seq := range []string{"look", "kool"} {
			if f, ok := tb.Fingerprint(javaSearch([]byte(seq), 0, uint32(i))); ok {
				java.TCPSearch(f)
			}
		}
	}
	if tb.total != 0 || tb.cnt.RecentFull.Load() != 0 {
		t.Fatalf("a client that cannot pair holds %d fingerprints (%d refused)", tb.total, tb.cnt.RecentFull.Load())
	}
	pvxs := tb.Join(hostA, s.offer)
	f := fp(t, tb, search(0, portA.Port(), 1, 2, 3))
	tb.UDPSearch(portA, f)
	pvxs.TCPSearch(fp(t, tb, search(0x80, 0, 1, 2, 3)))
	if tb.Paired(portA) != pvxs {
		t.Fatal("the PVXS client did not pair")
	}
}
