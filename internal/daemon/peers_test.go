package daemon

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/sim"
)

// Simulated PVA servers on real sockets for the search-through and
// neighbour tests: the TCP side is a one-server sim site (listable, or
// serving its names but refusing to list them: its `server` RPC fails, as
// on a server that does not offer the listing), the UDP side a peerUDP socket that answers
// searches for every server added to it, as that server would.

// peerServer is one simulated server: its TCP listener and its names.
type peerServer struct {
	site  *sim.Site
	info  sim.ServerInfo
	names map[string]bool
	le    bool // answer in little endian, as pvAccessCPP on x86 does
}

func startPeerServer(t *testing.T, listable bool, names ...string) *peerServer {
	t.Helper()
	o := sim.Options{Names: [][]string{names}, Host: lo, UpdateInterval: -1}
	if !listable {
		o.RPCError = "Not implemented"
	}
	return newPeerServer(t, o, names)
}

// startPeerServerAt starts a server that refuses listing at port (0: any;
// where an earlier one stopped: a restart), answering TCP searches over
// UDP as pvAccessCPP does when cpp is set.
func startPeerServerAt(t *testing.T, port uint16, cpp bool, names ...string) *peerServer {
	t.Helper()
	return newPeerServer(t, sim.Options{Names: [][]string{names}, Host: lo, UpdateInterval: -1,
		RPCError: "Not implemented", TCPPort: port, TCPSearchOverUDP: cpp}, names)
}

func newPeerServer(t *testing.T, o sim.Options, names []string) *peerServer {
	t.Helper()
	site := startSite(t, o)
	p := &peerServer{site: site, info: site.Server(0), names: map[string]bool{}}
	for _, n := range names {
		p.names[n] = true
	}
	return p
}

func (p *peerServer) GUID() pva.GUID           { return p.info.GUID }
func (p *peerServer) Endpoint() netip.AddrPort { return p.info.TCP }

// stop closes the server's listener and connections cleanly.
func (p *peerServer) stop(t *testing.T) {
	t.Helper()
	if err := p.site.Stop(0); err != nil {
		t.Fatal(err)
	}
}

// beacon sends one beacon of p from c to to, as PVXS builds it.
func (p *peerServer) beacon(c *net.UDPConn, to netip.AddrPort, seq uint8) error {
	b := pva.AppendBeacon(nil, pva.FlagServer|pva.FlagBigEndian, &pva.Beacon{
		GUID: p.GUID(), Sequence: seq, Addr: pva.AnyIPv4, Port: p.Endpoint().Port(), Protocol: "tcp"})
	_, err := c.WriteToUDPAddrPort(b, to)
	return err
}

// peerUDP answers the searches arriving on conn for the servers added to
// it, as a PVXS server does: to the body's reply address (the source when
// it is zero) at the body's reply port; only names held, or found=0 to a
// MustReply ping; one message per datagram after an optional origin tag.
type peerUDP struct {
	conn *net.UDPConn
	// onSearch, if set, sees every search (its header flags and decoded
	// body) before it is answered; it returns false to drop it.
	onSearch func(from netip.AddrPort, m *pva.Search) bool
	// pingDelay delays answers to discovery pings (pvAccessCPP waits a
	// random 50-150 ms).
	pingDelay func() time.Duration

	mu       sync.Mutex
	servers  []*peerServer
	searches atomic.Int64
	wg       sync.WaitGroup
}

func newPeerUDP(t *testing.T, conn *net.UDPConn) *peerUDP {
	u := &peerUDP{conn: conn}
	t.Cleanup(func() { conn.Close(); u.wg.Wait() })
	return u
}

func (u *peerUDP) start() {
	u.wg.Add(1)
	go u.loop()
}

func (u *peerUDP) add(p *peerServer) {
	u.mu.Lock()
	u.servers = append(u.servers, p)
	u.mu.Unlock()
}

func (u *peerUDP) remove(p *peerServer) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i, s := range u.servers {
		if s == p {
			u.servers = append(u.servers[:i], u.servers[i+1:]...)
			return
		}
	}
}

func (u *peerUDP) addr() netip.AddrPort {
	return netip.AddrPortFrom(lo, u.conn.LocalAddr().(*net.UDPAddr).AddrPort().Port())
}

func (u *peerUDP) loop() {
	defer u.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := u.conn.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		} else if err != nil {
			continue
		}
		u.handle(buf[:n], from)
	}
}

// handle processes one datagram (exported to the pvAccessCPP peer, which
// calls it for what it does not forward).
func (u *peerUDP) handle(b []byte, from netip.AddrPort) {
	h, payload, rest, err := pva.SplitMessage(b)
	if err != nil {
		return
	}
	if h.Command == pva.CmdOriginTag {
		if h, payload, _, err = pva.SplitMessage(rest); err != nil {
			return
		}
	}
	var m pva.Search
	if h.Command != pva.CmdSearch || m.Decode(payload, h.BigEndian()) != nil {
		return
	}
	u.searches.Add(1)
	if u.onSearch != nil && !u.onSearch(from, &m) {
		return
	}
	to := from.Addr()
	if !m.ReplyAddr.IsAny() {
		to = m.ReplyAddr.Addr()
	}
	if m.ReplyPort == 0 {
		return
	}
	dest := netip.AddrPortFrom(to, m.ReplyPort)
	u.mu.Lock()
	servers := append([]*peerServer(nil), u.servers...)
	u.mu.Unlock()
	for _, s := range servers {
		var cids []uint32
		if m.HasProtocol("tcp") {
			for _, n := range m.Names {
				if s.names[string(n.Name)] {
					cids = append(cids, n.CID)
				}
			}
		}
		if len(cids) == 0 && !m.MustReply() {
			continue
		}
		flags := uint8(pva.FlagServer | pva.FlagBigEndian)
		if s.le {
			flags = pva.FlagServer
		}
		resp := pva.AppendSearchResponse(nil, flags, &pva.SearchResponse{GUID: s.GUID(), Seq: m.Seq, Addr: pva.AnyIPv4,
			Port: s.Endpoint().Port(), Protocol: []byte("tcp"), Found: len(cids) > 0, CIDs: cids})
		if len(m.Names) == 0 && u.pingDelay != nil {
			time.AfterFunc(u.pingDelay(), func() { _, _ = u.conn.WriteToUDPAddrPort(resp, dest) })
			continue
		}
		_, _ = u.conn.WriteToUDPAddrPort(resp, dest)
	}
}

// cppNeighbour is the pvAccessCPP server of a shared host as
// docs/protocol.md, "The search port's socket" and "Unicast forwarding"
// describe it: one socket bound to 127.0.0.1:port, which the kernel prefers
// to every wildcard socket for a unicast to 127.0.0.1, so it takes every
// such datagram, beacons included, and forwards to the loopback group only
// the searches flagged Unicast (0x80), in its own format (the original
// header's first three bytes, CMD_ORIGIN_TAG with its socket's bind
// address, the search with the flag cleared and the reply address filled
// in); and one socket bound to the group, which answers what was forwarded.
// Its own answers are little endian; discovery pings are answered after
// 50-150 ms.
type cppNeighbour struct {
	uni, group *peerUDP
	beacons    atomic.Int64 // datagrams it swallowed that were not searches
	forwarded  atomic.Int64
	unflagged  atomic.Int64 // unicast searches it did not forward
}

func newCPPNeighbour(t *testing.T, uni, group *net.UDPConn, groupAddr netip.AddrPort, srv *peerServer) *cppNeighbour {
	srv.le = true
	c := &cppNeighbour{uni: newPeerUDP(t, uni), group: newPeerUDP(t, group)}
	delay := func() time.Duration { return time.Duration(50+rand.IntN(100)) * time.Millisecond }
	c.uni.pingDelay, c.group.pingDelay = delay, delay
	c.uni.add(srv)
	c.group.add(srv)
	bind := pva.AddressFrom(uni.LocalAddr().(*net.UDPAddr).AddrPort().Addr())
	// Unflagged unicast searches are answered here only: the other
	// servers on the host never see them.
	c.uni.onSearch = func(netip.AddrPort, *pva.Search) bool { c.unflagged.Add(1); return true }
	// The unicast socket's own loop: forward flagged searches, swallow
	// everything that is not a search, hand the rest to the answerer.
	c.uni.wg.Add(1)
	go func() {
		defer c.uni.wg.Done()
		buf := make([]byte, 65536)
		for {
			n, from, err := uni.ReadFromUDPAddrPort(buf)
			if errors.Is(err, net.ErrClosed) {
				return
			} else if err != nil {
				continue
			}
			b := buf[:n]
			h, payload, _, err := pva.SplitMessage(b)
			if err != nil || h.Command != pva.CmdSearch {
				c.beacons.Add(1)
				continue
			}
			var m pva.Search
			if m.Decode(payload, h.BigEndian()) != nil {
				continue
			}
			if !m.Unicast() {
				c.uni.handle(b, from)
				continue
			}
			reply := m.ReplyAddr
			if reply.IsAny() {
				reply = pva.AddressFrom(from.Addr())
			}
			msg := b[:pva.HeaderSize+len(payload)]
			fw := append([]byte(nil), msg[:3]...)
			fw = append(fw, byte(pva.CmdOriginTag))
			if h.BigEndian() {
				fw = binary.BigEndian.AppendUint32(fw, 16)
			} else {
				fw = binary.LittleEndian.AppendUint32(fw, 16)
			}
			fw = append(fw, bind[:]...)
			at := len(fw)
			fw = append(fw, msg...)
			fw[at+pva.HeaderSize+pva.SearchOffFlags] &^= pva.SearchUnicast
			copy(fw[at+pva.HeaderSize+pva.SearchOffReplyAddr:], reply[:])
			c.forwarded.Add(1)
			_, _ = uni.WriteToUDPAddrPort(fw, groupAddr)
		}
	}()
	c.group.start()
	return c
}
