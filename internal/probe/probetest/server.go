// Package probetest is a minimal PVA server for probe tests: it serves the
// `server` PV RPC (op=channels, op=info) as PVXS does, answers discovery
// pings over TCP and UDP, sends beacons on request, and can misbehave on
// purpose (refuse the channel, fail the RPC, go silent with its sockets
// open). It listens on loopback only.
//
// It is built on pvaconn.Serve and the pva codec; it owns nothing but its
// own sockets.
package probetest

import (
	"crypto/rand"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
)

// Options configure a Server.
// listingQueue lets one reply carry a large listing (100,000 names are
// about 3 MB); pvaconn's default queue is sized for pvans's own replies.
const listingQueue = 64 << 20

type Options struct {
	GUID          pva.GUID // random if zero
	Names         []string
	ImplLang      string // op=info; default "cpp"
	Version       string // op=info; default "PVXS 1.5.2"
	RefuseChannel bool   // CREATE_CHANNEL refused (SID 0xFFFFFFFF, FATAL)
	RPCError      string // if set, every EXEC is answered with this ERROR status
	NoPing        bool   // ignore discovery pings
	BigEndian     bool
}

// Server is one simulated server.
type Server struct {
	opt   Options
	ln    net.Listener
	names atomic.Pointer[[]string]

	mu     sync.Mutex
	conns  map[*muteConn]*pvaconn.Conn
	muted  chan struct{} // non-nil while muted; closed by Unmute
	udp    *net.UDPConn
	closed bool

	accepted atomic.Int64
	listings atomic.Int64
	seq      atomic.Uint32
	wg       sync.WaitGroup
}

// Start listens on 127.0.0.1 (ephemeral port) and serves until Close.
func Start(opt Options) (*Server, error) {
	if opt.GUID.IsZero() {
		rand.Read(opt.GUID[:])
	}
	if opt.ImplLang == "" {
		opt.ImplLang = "cpp"
	}
	if opt.Version == "" {
		opt.Version = "PVXS 1.5.2"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{opt: opt, ln: ln, conns: make(map[*muteConn]*pvaconn.Conn)}
	s.SetNames(opt.Names)
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the TCP endpoint.
func (s *Server) Addr() netip.AddrPort { return s.ln.Addr().(*net.TCPAddr).AddrPort() }

// GUID is the server's identity.
func (s *Server) GUID() pva.GUID { return s.opt.GUID }

// SetNames replaces the served names (sorted and de-duplicated on reply).
func (s *Server) SetNames(names []string) {
	n := slices.Clone(names)
	slices.Sort(n)
	n = slices.Compact(n)
	s.names.Store(&n)
}

// Accepted is the number of TCP connections accepted.
func (s *Server) Accepted() int { return int(s.accepted.Load()) }

// Listings is the number of op=channels replies sent.
func (s *Server) Listings() int { return int(s.listings.Load()) }

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.accepted.Add(1)
		mc := &muteConn{Conn: nc, s: s, done: make(chan struct{})}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[mc] = nil
		s.mu.Unlock()
		c := pvaconn.Serve(mc, pvaconn.Options{BigEndian: s.opt.BigEndian, SendQueueBytes: listingQueue}, &handler{s: s})
		s.mu.Lock()
		if _, ok := s.conns[mc]; ok {
			s.conns[mc] = c
		}
		s.mu.Unlock()
		go func() {
			<-c.Done()
			s.mu.Lock()
			delete(s.conns, mc)
			s.mu.Unlock()
		}()
	}
}

// CloseConns closes every TCP connection (clean close: FIN), keeping the
// listener.
func (s *Server) CloseConns() {
	s.mu.Lock()
	var cs []*muteConn
	for mc := range s.conns {
		cs = append(cs, mc)
	}
	s.mu.Unlock()
	for _, mc := range cs {
		mc.Close()
	}
}

// Close closes the listener, the UDP socket and every connection.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	if s.muted != nil {
		close(s.muted)
		s.muted = nil
	}
	if s.udp != nil {
		s.udp.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.CloseConns()
	s.wg.Wait()
}

// Mute makes the server go silent without closing anything: every
// connection stops reading and writing (ECHO is no longer answered), as a
// hung process or a pulled cable looks to a peer.
func (s *Server) Mute() {
	s.mu.Lock()
	if s.muted == nil {
		s.muted = make(chan struct{})
	}
	s.mu.Unlock()
}

// Unmute resumes reading and writing.
func (s *Server) Unmute() {
	s.mu.Lock()
	if s.muted != nil {
		close(s.muted)
		s.muted = nil
	}
	s.mu.Unlock()
}

func (s *Server) mutedCh() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.muted
}

// muteConn blocks reads (holding the bytes read) and writes while the
// server is muted.
type muteConn struct {
	net.Conn
	s    *Server
	once sync.Once
	done chan struct{}
}

func (c *muteConn) hold() bool {
	if m := c.s.mutedCh(); m != nil {
		select {
		case <-m:
		case <-c.done:
			return false
		}
	}
	return true
}

func (c *muteConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if !c.hold() {
		return 0, net.ErrClosed
	}
	return n, err
}

func (c *muteConn) Write(b []byte) (int, error) {
	if !c.hold() {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

func (c *muteConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

// handler serves one connection.
type handler struct {
	s  *Server
	tc pva.TypeCache
	// sid -> channel name; only "server" is served
	nextSID uint32
}

func (h *handler) Message(c *pvaconn.Conn, hd pva.Header, payload []byte) {
	s := h.s
	be := hd.BigEndian()
	switch hd.Command {
	case pva.CmdSearch:
		var m pva.Search
		if m.Decode(payload, be) != nil || s.opt.NoPing || !m.IsDiscovery() || !m.MustReply() {
			return
		}
		c.Send(s.pingReply(c.Flags(), m.Seq))
	case pva.CmdCreateChannel:
		var m pva.CreateChannel
		if m.Decode(payload, be) != nil {
			c.Close()
			return
		}
		for _, ch := range m.Channels {
			r := pva.CreateChannelReply{CID: ch.CID}
			if ch.Name != "server" || s.opt.RefuseChannel {
				r.SID = pva.RefusedSID
				r.Status = pva.Status{Type: pva.StatusFatal, Message: "Refused to create Channel"}
			} else {
				h.nextSID++
				r.SID = 0x1000 + h.nextSID
			}
			c.Send(pva.AppendCreateChannelReply(nil, c.Flags(), &r))
		}
	case pva.CmdRPC:
		var m pva.RPCRequest
		if m.Decode(payload, be, &h.tc) != nil {
			c.Close()
			return
		}
		r := pva.RPCReply{IOID: m.IOID, Subcmd: m.Subcmd}
		switch {
		case m.IsInit():
		case s.opt.RPCError != "":
			r.Status = pva.Status{Type: pva.StatusError, Message: s.opt.RPCError}
		default:
			_, op, err := pva.NTURIOp(m.Value)
			switch {
			case err != nil:
				r.Status = pva.Status{Type: pva.StatusError, Message: err.Error()}
			case op == pva.OpChannels:
				r.Value = pva.NewChannelList(*s.names.Load())
				s.listings.Add(1)
			case op == pva.OpInfo:
				r.Value = pva.NewServerInfo(s.opt.ImplLang, s.opt.Version)
			default:
				r.Status = pva.Status{Type: pva.StatusError, Message: "Not implemented"}
			}
		}
		c.Send(pva.AppendRPCReply(nil, c.Flags(), &r))
	}
}

func (s *Server) pingReply(flags uint8, seq uint32) []byte {
	return pva.AppendSearchResponse(nil, flags, &pva.SearchResponse{
		GUID: s.opt.GUID, Seq: seq, Port: s.Addr().Port(), Protocol: []byte("tcp"),
	})
}

// ListenUDP opens a loopback UDP socket that answers discovery pings
// (found=0, zero address, this server's TCP port) and returns its address.
func (s *Server) ListenUDP() (netip.AddrPort, error) {
	u, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return netip.AddrPort{}, err
	}
	s.mu.Lock()
	s.udp = u
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 1500)
		for {
			n, from, err := u.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			h, payload, _, err := pva.SplitMessage(buf[:n])
			if err != nil || h.Command != pva.CmdSearch || s.opt.NoPing {
				continue
			}
			var m pva.Search
			if m.Decode(payload, h.BigEndian()) != nil || !m.IsDiscovery() || !m.MustReply() {
				continue
			}
			to := from
			if !m.ReplyAddr.IsAny() {
				to = netip.AddrPortFrom(m.ReplyAddr.Addr(), m.ReplyPort)
			} else if m.ReplyPort != 0 {
				to = netip.AddrPortFrom(from.Addr(), m.ReplyPort)
			}
			if !to.Addr().IsLoopback() {
				continue // loopback only, whatever the body says
			}
			u.WriteToUDPAddrPort(s.pingReply(pva.FlagServer|pva.FlagBigEndian, m.Seq), to)
		}
	}()
	return u.LocalAddr().(*net.UDPAddr).AddrPort(), nil
}

// SendBeacon sends one CMD_BEACON (as PVXS: big endian, wildcard address)
// to a loopback destination, from the UDP socket (ListenUDP first) or an
// ephemeral one.
func (s *Server) SendBeacon(to netip.AddrPort, changeCount uint16) error {
	if !to.Addr().IsLoopback() {
		return errors.New("probetest: beacons go to loopback only")
	}
	msg := pva.AppendBeacon(nil, pva.FlagServer|pva.FlagBigEndian, &pva.Beacon{
		GUID: s.opt.GUID, Sequence: uint8(s.seq.Add(1)), ChangeCount: changeCount,
		Addr: pva.AnyIPv4, Port: s.Addr().Port(), Protocol: "tcp",
	})
	s.mu.Lock()
	u := s.udp
	s.mu.Unlock()
	if u != nil {
		_, err := u.WriteToUDPAddrPort(msg, to)
		return err
	}
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(to))
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write(msg)
	return err
}
