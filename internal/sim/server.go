package sim

import (
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
)

// listingQueue lets one reply carry a large listing (100,000 names are
// about 3 MB); pvaconn's default queue is sized for pvans's own replies.
const listingQueue = 64 << 20

// nameSet is an immutable name set, swapped whole by SetNames so lookups
// on the search path take no lock.
type nameSet struct {
	ordered []string       // configured order, duplicates dropped
	sorted  []string       // what op=channels lists
	index   map[string]int // name -> position in ordered
}

func newNameSet(names []string) *nameSet {
	ns := &nameSet{index: make(map[string]int, len(names)), ordered: make([]string, 0, len(names))}
	for _, n := range names {
		if _, dup := ns.index[n]; !dup {
			ns.index[n] = len(ns.ordered)
			ns.ordered = append(ns.ordered, n)
		}
	}
	ns.sorted = slices.Clone(ns.ordered)
	slices.Sort(ns.sorted)
	return ns
}

// server is one simulated server slot: stable across restarts (index,
// address, ports, names); each start is a new instance with a new GUID.
type server struct {
	site  *Site
	index int
	addr  netip.Addr
	names atomic.Pointer[nameSet]

	life    sync.Mutex // serialises start/stop/restart
	mu      sync.Mutex
	tcpPort uint16 // 0 until first bound; then reused by restarts
	udpPort uint16
	tlsPort uint16 // likewise, with Options.TLS
	inst    *instance
	state   State

	accepted atomic.Int64 // TCP connections accepted, over every incarnation
	listings atomic.Int64 // op=channels replies sent
	unknown  atomic.Int64 // CREATE_CHANNEL for names not served, unanswered (Options.Java)
	muteTLS  atomic.Bool  // no UDP answer to a search listing "tls" (Site.MuteTLSSearches)
}

func newServer(site *Site, i int, addr netip.Addr, tcpPort, udpPort uint16, names []string) *server {
	s := &server{site: site, index: i, addr: addr, tcpPort: tcpPort, udpPort: udpPort, state: Stopped}
	s.names.Store(newNameSet(names))
	return s
}

// instance is one incarnation of a server: one GUID, one set of sockets.
type instance struct {
	srv     *server
	guid    pva.GUID
	ln      net.Listener
	tlsLn   net.Listener // nil without Options.TLS
	udp     *net.UDPConn
	tcpPort uint16
	tlsPort uint16 // 0 without Options.TLS
	silent  atomic.Bool
	change  atomic.Uint32 // beacon change count (wraps at 16 bits)

	mu      sync.Mutex
	closed  bool
	held    chan struct{} // non-nil while silent; closed by revive
	conns   map[*holdConn]*pvaconn.Conn
	timer   clock.Timer
	beacons int
	seq     uint8
	wg      sync.WaitGroup

	pvs pvState
}

func (s *server) start() error {
	in := &instance{srv: s, guid: newGUID(), conns: map[*holdConn]*pvaconn.Conn{}}
	in.pvs.init(in, s.site.opts.Clock.Now())
	s.mu.Lock()
	tcpPort, udpPort := s.tcpPort, s.udpPort
	s.mu.Unlock()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(s.addr, tcpPort).String())
	if err != nil {
		return err
	}
	uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(s.addr, udpPort)))
	if err != nil {
		ln.Close()
		return err
	}
	in.ln, in.udp = ln, uc
	in.tcpPort = uint16(ln.Addr().(*net.TCPAddr).Port)
	if cfg := s.site.opts.TLS; cfg != nil {
		s.mu.Lock()
		tlsPort := s.tlsPort
		s.mu.Unlock()
		tl, err := tls.Listen("tcp", netip.AddrPortFrom(s.addr, tlsPort).String(), cfg)
		if err != nil {
			ln.Close()
			uc.Close()
			return err
		}
		in.tlsLn = tl
		in.tlsPort = uint16(tl.Addr().(*net.TCPAddr).Port)
	}

	s.mu.Lock()
	s.tcpPort = in.tcpPort
	if in.tlsPort != 0 {
		s.tlsPort = in.tlsPort
	}
	s.udpPort = uint16(uc.LocalAddr().(*net.UDPAddr).Port)
	s.inst, s.state = in, Running
	s.mu.Unlock()

	in.wg.Add(2)
	go func() {
		defer in.wg.Done()
		in.acceptLoop(in.ln)
	}()
	if in.tlsLn != nil {
		in.wg.Add(1)
		go func() {
			defer in.wg.Done()
			in.acceptLoop(in.tlsLn)
		}()
	}
	go func() {
		defer in.wg.Done()
		serveUDP(uc, func() []*instance {
			if in.silent.Load() {
				return nil
			}
			return []*instance{in}
		})
	}()
	in.beaconTick() // the first beacon goes out immediately
	s.site.opts.Logf("sim: server %d up: guid %s tcp %s udp %s tls port %d", s.index, in.guid, ln.Addr(), uc.LocalAddr(), in.tlsPort)
	return nil
}

// current returns the running (not silent, not stopped) instance or nil.
func (s *server) current() *instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != Running {
		return nil
	}
	return s.inst
}

func (s *server) info() ServerInfo {
	s.mu.Lock()
	in, st := s.inst, s.state
	inf := ServerInfo{
		Index: s.index, State: st,
		TCP:      netip.AddrPortFrom(s.addr, s.tcpPort),
		UDP:      netip.AddrPortFrom(s.addr, s.udpPort),
		Names:    slices.Clone(s.names.Load().sorted),
		Accepted: int(s.accepted.Load()),
		Listings: int(s.listings.Load()),

		UnknownCreates: int(s.unknown.Load()),
	}
	if s.tlsPort != 0 {
		inf.TLS = netip.AddrPortFrom(s.addr, s.tlsPort)
	}
	s.mu.Unlock()
	if in != nil {
		inf.GUID = in.guid
		inf.ChangeCount = uint16(in.change.Load())
	}
	return inf
}

func (s *server) silence() {
	s.mu.Lock()
	in := s.inst
	if s.state == Running {
		s.state = Silent
	}
	s.mu.Unlock()
	if in != nil {
		in.setSilent(true)
		s.site.opts.Logf("sim: server %d silent", s.index)
	}
}

// revive ends a silence: held connections resume where they stopped.
func (s *server) revive() bool {
	s.mu.Lock()
	in := s.inst
	if s.state == Silent {
		s.state = Running
	}
	s.mu.Unlock()
	if in == nil {
		return false
	}
	in.setSilent(false)
	s.site.opts.Logf("sim: server %d answering again", s.index)
	return true
}

// dropConns closes every TCP connection cleanly, keeping the listener.
func (s *server) dropConns() {
	s.mu.Lock()
	in := s.inst
	s.mu.Unlock()
	if in != nil {
		in.closeConns()
	}
}

func (s *server) stop() {
	s.life.Lock()
	defer s.life.Unlock()
	s.stopLocked()
}

func (s *server) stopLocked() {
	s.mu.Lock()
	in := s.inst
	s.inst, s.state = nil, Stopped
	s.mu.Unlock()
	if in != nil {
		in.close()
		s.site.opts.Logf("sim: server %d stopped", s.index)
	}
}

func (s *server) restart() error {
	s.life.Lock()
	defer s.life.Unlock()
	s.stopLocked()
	return s.start()
}

func (s *server) setNames(names []string) {
	s.names.Store(newNameSet(names))
	s.mu.Lock()
	in := s.inst
	s.mu.Unlock()
	if in != nil {
		in.change.Add(1)
	}
}

func (in *instance) close() {
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		return
	}
	in.closed = true
	if in.timer != nil {
		in.timer.Stop()
	}
	if in.held != nil {
		close(in.held)
		in.held = nil
	}
	in.mu.Unlock()
	in.closeConns()
	in.pvs.stop()
	in.ln.Close()
	if in.tlsLn != nil {
		in.tlsLn.Close()
	}
	in.udp.Close()
	in.wg.Wait()
}

func (in *instance) acceptLoop(ln net.Listener) {
	opts := &in.srv.site.opts
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE: back off, keep serving
			continue
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true) // a TLS listener's conns are *tls.Conn: Go sets NoDelay by default
		}
		in.srv.accepted.Add(1)
		hc := &holdConn{Conn: nc, in: in, done: make(chan struct{})}
		in.mu.Lock()
		if in.closed {
			in.mu.Unlock()
			nc.Close()
			return
		}
		in.conns[hc] = nil
		in.wg.Add(1)
		in.mu.Unlock()
		c := pvaconn.Serve(hc, pvaconn.Options{BigEndian: opts.BigEndian, Counters: in.srv.site.connCounters,
			Clock: opts.Clock, SendQueueBytes: listingQueue}, newHandler(in))
		in.mu.Lock()
		if _, ok := in.conns[hc]; ok {
			in.conns[hc] = c
		}
		in.mu.Unlock()
		go func() {
			defer in.wg.Done()
			<-c.Done()
			in.mu.Lock()
			delete(in.conns, hc)
			in.mu.Unlock()
		}()
	}
}

// closeConns closes every connection (the listener stays).
func (in *instance) closeConns() {
	in.mu.Lock()
	cs := make([]*holdConn, 0, len(in.conns))
	for hc := range in.conns {
		cs = append(cs, hc)
	}
	in.mu.Unlock()
	for _, hc := range cs {
		hc.Close()
	}
}

// setSilent starts or ends a silence: no UDP answers, no beacons, TCP
// connections held (see holdConn).
func (in *instance) setSilent(on bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.silent.Store(on)
	switch {
	case on && in.held == nil && !in.closed:
		in.held = make(chan struct{})
	case !on && in.held != nil:
		close(in.held)
		in.held = nil
	}
}

// heldCh is the channel a held connection waits on, nil when not silent.
func (in *instance) heldCh() chan struct{} {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.held
}

// beaconTick sends one beacon (unless silent) and schedules the next.
func (in *instance) beaconTick() {
	opts := &in.srv.site.opts
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed || len(opts.BeaconDests) == 0 || opts.Java {
		return
	}
	in.sendBeacon(opts.BeaconDests)
	in.beacons++
	next := opts.BeaconInterval
	if next <= 0 {
		next = pva.BeaconAfter(in.beacons)
	}
	in.timer = opts.Clock.AfterFunc(next, in.beaconTick)
}

// sendBeacon sends one beacon (unless silent) to dests; in.mu held.
func (in *instance) sendBeacon(dests []netip.AddrPort) {
	if in.silent.Load() || in.closed || in.srv.site.opts.Java {
		return
	}
	b := pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer, &pva.Beacon{
		GUID: in.guid, Sequence: in.seq, ChangeCount: uint16(in.change.Load()),
		Addr: pva.AnyIPv4, Port: in.tcpPort, Protocol: "tcp",
	})
	for _, d := range dests {
		_, _ = in.udp.WriteToUDPAddrPort(b, d)
	}
	in.seq++
}

// claim appends the CIDs of names this server holds.
func (in *instance) claim(names []pva.SearchName, cids []uint32) []uint32 {
	ns := in.srv.names.Load()
	for _, n := range names {
		if _, ok := ns.index[string(n.Name)]; ok {
			cids = append(cids, n.CID)
		}
	}
	return cids
}

// answerUDP answers one decoded search to dest from this server's socket,
// as PVXS does: only if a name is claimed or MustReply is set; names are
// looked at only when "tcp" is in the protocol list.
func (in *instance) answerUDP(s *pva.Search, dest netip.AddrPort, scratch []byte, cids []uint32) ([]byte, []uint32) {
	cids = cids[:0]
	if len(s.Names) == 0 && in.srv.site.opts.NoPing {
		return scratch, cids
	}
	if in.srv.muteTLS.Load() && s.HasProtocol("tls") {
		return scratch, cids
	}
	if in.srv.site.opts.Java {
		return in.answerUDPJava(s, dest, scratch, cids)
	}
	if s.HasProtocol("tcp") {
		cids = in.claim(s.Names, cids)
	}
	if len(cids) == 0 && !s.MustReply() {
		return scratch, cids
	}
	port, proto := in.tcpPort, protoTCP
	if in.tlsPort != 0 && s.HasProtocol("tls") {
		// PVXS (server.cpp onSearch): "tls" listed anywhere, and a TLS
		// context, is answered with the TLS port.
		port, proto = in.tlsPort, protoTLS
	}
	scratch = pva.AppendSearchResponse(scratch[:0], pva.FlagBigEndian|pva.FlagServer, &pva.SearchResponse{
		GUID: in.guid, Seq: s.Seq, Addr: pva.AnyIPv4, Port: port,
		Protocol: proto, Found: len(cids) > 0, CIDs: cids,
	})
	_, _ = in.udp.WriteToUDPAddrPort(scratch, dest)
	return scratch, cids
}

// answerUDPJava answers a search as Phoebus core-pva's PVAServer does
// (ServerUDPHandler, PVAServer.handleSearchRequest, SearchResponse.encode):
// a search without names is a "list servers" ping, answered only with
// MustReply; with names, "tcp" or "tls" must be listed, and each name is
// answered on its own: a negative CID (as a Java int) with a ping reply,
// a name served with a reply claiming its CID, any other not at all. A
// ping reply carries sequence ID 0 and no CIDs.
func (in *instance) answerUDPJava(s *pva.Search, dest netip.AddrPort, scratch []byte, cids []uint32) ([]byte, []uint32) {
	send := func(seq uint32, claim []uint32) {
		scratch = pva.AppendSearchResponse(scratch[:0], pva.FlagBigEndian|pva.FlagServer, &pva.SearchResponse{
			GUID: in.guid, Seq: seq, Addr: pva.AnyIPv4, Port: in.tcpPort,
			Protocol: protoTCP, Found: len(claim) > 0, CIDs: claim,
		})
		_, _ = in.udp.WriteToUDPAddrPort(scratch, dest)
	}
	if len(s.Names) == 0 {
		if s.MustReply() {
			send(0, nil)
		}
		return scratch, cids[:0]
	}
	if !s.HasProtocol("tcp") && !s.HasProtocol("tls") {
		return scratch, cids[:0]
	}
	for _, n := range javaAnswers(in.srv.names.Load(), s.Names) {
		if n.ping {
			send(0, nil)
		} else {
			cids = append(cids[:0], n.cid)
			send(s.Seq, cids)
		}
	}
	return scratch, cids[:0]
}

// javaAnswer is one reply a Java server sends to a searched name.
type javaAnswer struct {
	cid  uint32
	ping bool // the CID was negative: a "list servers" reply, no claim
}

// javaAnswers are the replies Phoebus core-pva's server sends to names, in
// order: it reads each CID as a signed int (PVAServer.handleSearchRequest,
// cid < 0).
func javaAnswers(ns *nameSet, names []pva.SearchName) []javaAnswer {
	var out []javaAnswer
	for _, n := range names {
		switch _, ok := ns.index[string(n.Name)]; {
		case int32(n.CID) < 0:
			out = append(out, javaAnswer{ping: true})
		case ok:
			out = append(out, javaAnswer{cid: n.CID})
		}
	}
	return out
}

var (
	protoTCP = []byte("tcp")
	protoTLS = []byte("tls")
)

// serveUDP reads search datagrams from uc until it is closed and hands
// each search to the instances targets returns. Like PVXS it looks at one
// message per datagram, after an optional CMD_ORIGIN_TAG.
func serveUDP(uc *net.UDPConn, targets func() []*instance) {
	buf := make([]byte, 65536)
	var (
		s       pva.Search
		scratch []byte
		cids    []uint32
	)
	for {
		n, src, err := uc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		msg := buf[:n]
		for len(msg) > 0 {
			h, payload, rest, err := pva.SplitMessage(msg)
			if err != nil || h.Control() || h.Segment() != 0 {
				break
			}
			msg = rest
			if h.Command == pva.CmdOriginTag {
				continue
			}
			if h.Command != pva.CmdSearch || s.Decode(payload, h.BigEndian()) != nil {
				break
			}
			ip := src.Addr().Unmap()
			if !s.ReplyAddr.IsAny() {
				ip = s.ReplyAddr.Addr()
			}
			if s.ReplyPort == 0 {
				break // reply port comes from the body; 0 cannot be answered
			}
			dest := netip.AddrPortFrom(ip, s.ReplyPort)
			for _, in := range targets() {
				scratch, cids = in.answerUDP(&s, dest, scratch, cids)
			}
			break
		}
	}
}
