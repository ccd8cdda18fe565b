// Package tcpsearch is the name-server listener: the PVA TCP server that
// PVXS clients configured with EPICS_PVA_NAME_SERVERS connect to. It
// answers CMD_SEARCH over TCP from the resolver, one CMD_SEARCH_RESPONSE per
// claiming server (that server's GUID and real endpoint), remembers names
// nobody claims yet as waiters and pushes their answer on the same
// connection when they are learned, and refuses CREATE_CHANNEL unless a
// ChannelProvider (the daemon's own `server` PV) takes it.
//
// It owns the listening sockets, the connection limit and the per-message
// search logic. Framing, handshake, ECHO and per-connection limits are
// internal/pvaconn's; lookups and waiters are the resolver's; parsing the
// configuration (EPICS_PVAS_SERVER_PORT, interfaces) is internal/config's:
// New takes addresses.
package tcpsearch

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/addrmap"
	"github.com/pvans-project/pvans/internal/answer"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/keychain"
	"github.com/pvans-project/pvans/internal/limitlog"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/ratelimit"
	"github.com/pvans-project/pvans/internal/twin"
)

// DefaultPort is EPICS_PVAS_SERVER_PORT's default.
const DefaultPort = 5075

// DefaultMaxNamesPerSearch bounds the names taken from one CMD_SEARCH.
// PVXS packs searches into ≤ 1400 bytes (a few dozen names); the wire
// allows 65535. It is no setting: a client needs no more.
const DefaultMaxNamesPerSearch = 4096

// ChannelProvider lets the daemon serve channels of its own (the `server`
// PV that pvxlist reads) on name-server connections.
type ChannelProvider interface {
	// Message is offered every application message other than CMD_SEARCH
	// and reports whether it handled it. An unhandled CREATE_CHANNEL is
	// refused; other unhandled messages are ignored. payload is valid only
	// during the call.
	Message(c *pvaconn.Conn, h pva.Header, payload []byte) bool
	// Closed releases what the provider keeps for c.
	Closed(c *pvaconn.Conn)
}

// Options configure the listener.
type Options struct {
	// Listen is every address to listen on (port 0 picks one; see Addrs).
	Listen []netip.AddrPort
	// TLSListen is every address of the Secure PVAccess listener (clients
	// name it pvas://host:port), served exactly as Listen but over TLS
	// with the TLS configuration; empty or a nil TLS: none (see TLSAddrs).
	TLSListen []netip.AddrPort
	TLS       *tls.Config
	// GUID is pvans' own, sent in negative (found=0) replies.
	GUID pva.GUID
	// AddressMap rewrites the endpoint named to a client (NAT,
	// containers); nil names the learned endpoint.
	AddressMap addrmap.Map
	// MaxConns bounds concurrent connections; extra ones are accepted and
	// closed at once (counted). 0 = no bound (the daemon passes
	// tcp.max_connections).
	MaxConns int
	// MaxConnsPerSource bounds one source address's concurrent
	// connections, so one host cannot fill MaxConns; extra ones are closed
	// at accept (counted). 0 = no bound; RateExempt sources are exempt.
	MaxConnsPerSource int
	// Conn carries the per-connection limits (IdleTimeout, MaxMessage,
	// SendQueueBytes, HandshakeTimeout, MessageTimeout, BigEndian), zero
	// ones as pvaconn reads them. Role, Counters and Logger are set by the
	// listener.
	Conn pvaconn.Options
	// Channels is optional; nil refuses every CREATE_CHANNEL.
	Channels ChannelProvider
	Logger   *zap.Logger

	// ClientAllowed is the client access list: a connection from an
	// address it refuses is closed at accept (counted, logged at info once per source per minute).
	// Nil allows everyone.
	ClientAllowed func(netip.Addr) bool
	// ClientCertAllowed, when set, replaces ClientAllowed on the TLS
	// listener: a client is checked when its TLS handshake completes,
	// before any PVA message, by address and by the x509 account of its
	// verified certificate (keychain.Account; "" for none); one it refuses
	// fails the handshake and is closed (counted, logged at most once per
	// interval).
	ClientCertAllowed func(addr netip.Addr, account string) bool
	// MessageRate and MessageBurst limit the application messages (searches,
	// CREATE_CHANNEL, …) taken per second from one source address, over
	// all its connections. Messages beyond are dropped and counted, never
	// answered and never a reason to disconnect (PVXS clients retry).
	// MessageRate 0 = unlimited.
	MessageRate  float64
	MessageBurst int
	// RateSources bounds the source addresses the limiter remembers
	// (0 = 65536); RateExempt sources are never limited.
	RateSources int
	RateExempt  []netip.Prefix
	// MaxNamesPerSearch bounds the names taken from one CMD_SEARCH;
	// extras are dropped and counted. 0 = 4096, negative = no bound
	// beyond the wire's 65535.
	MaxNamesPerSearch int
	// BufferBytesTotal: see Policy.
	BufferBytesTotal int64
	// Clock drives the rate limiter and the refused-client log; nil = the
	// wall clock.
	Clock clock.Clock
	// Insight sees every search answered from the resolver (nil: none).
	Insight SearchObserver
	// Twins pairs each connection with its client's UDP search socket, so
	// the answers to that socket's searches can come over the connection
	// (nil: none).
	Twins *twin.Table
}

// SearchObserver is told about every search the resolver answered
// (*insight.Insight is one), on the connection's read goroutine
// (answer.Observer).
type SearchObserver = answer.Observer

// Policy is the part of the Options a running listener can change (a
// configuration reload): who may connect, how many, how fast, and the
// limits of connections accepted from then on. Each tag names the setting
// the field takes (config.Fill).
type Policy struct {
	ClientAllowed     func(netip.Addr) bool
	ClientCertAllowed func(addr netip.Addr, account string) bool
	MaxConns          int `setting:"tcp.max_connections"`
	MaxConnsPerSource int
	Conn              pvaconn.Options // IdleTimeout, MaxMessage, SendQueueBytes, HandshakeTimeout, MessageTimeout
	MessageRate       float64         `setting:"rate_limit.tcp_messages_per_second"`
	MessageBurst      int
	RateSources       int
	RateExempt        []netip.Prefix `setting:"rate_limit.exempt"`
	MaxNamesPerSearch int
	AddressMap        addrmap.Map `setting:"map.rules"`
	// BufferBytesTotal bounds what all connections together buffer beyond
	// their base buffers (pvaconn.Budget): replies queued to clients that
	// do not read, large messages being received. 0 = no bound.
	BufferBytesTotal int64
}

func (o *Options) policy() Policy {
	return Policy{ClientAllowed: o.ClientAllowed, ClientCertAllowed: o.ClientCertAllowed, MaxConns: o.MaxConns, MaxConnsPerSource: o.MaxConnsPerSource,
		Conn: o.Conn, MessageRate: o.MessageRate, MessageBurst: o.MessageBurst, RateSources: o.RateSources,
		RateExempt: o.RateExempt, MaxNamesPerSearch: o.MaxNamesPerSearch, AddressMap: o.AddressMap,
		BufferBytesTotal: o.BufferBytesTotal}
}

// policy is a Policy in force, with its limiters. A message or an
// accepted connection is handled under one policy throughout.
type policy struct {
	Policy
	limit      *ratelimit.Limiter // messages; nil: unlimited
	handshakes *ratelimit.Limiter // TLS handshakes
	// repeats: the names each busy source searched lately (admitSearch);
	// kept across Apply.
	repeats *ratelimit.Recent
}

// The TLS handshake budget of one source address. A full handshake costs
// pvans 2.6–2.7 ms of CPU, 2.5 times the client's (issue 39: one source
// ran 400 a second, a core's worth): a source may start TLSHandshakeBurst
// at once, TLSHandshakeRate a second after that, and a connection beyond
// is closed at accept, before its handshake. A PVXS client opens one TLS
// connection to a name server and keeps it, so a host with fifty clients
// starting together stays within the burst. Sources are remembered as
// the message limiter's are (RateSources, least recently seen forgotten;
// RateExempt sources are never limited). Constants, not settings: no
// client needs more, and the CPU they protect is the same everywhere.
const (
	TLSHandshakeRate  = 10
	TLSHandshakeBurst = 50
)

// Apply applies a new policy. Connections open from clients it
// refuses are closed now; the connection bounds and limits apply from the
// next accepted connection (open ones keep theirs, and none is closed to
// get under a lowered bound). A changed rate, burst or exemption list
// starts a new limiter: every source begins with a full burst.
func (s *Server) Apply(p Policy) {
	if p.MaxNamesPerSearch == 0 {
		p.MaxNamesPerSearch = DefaultMaxNamesPerSearch
	}
	p.Conn.Role = pvaconn.Server
	p.Conn.Counters = &s.conn
	p.Conn.Budget = &s.budget
	s.budget.SetMax(p.BufferBytesTotal)
	p.Conn.Logger = s.log
	next := &policy{Policy: p}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.pol.Load()
	sameSources := cur != nil && cur.RateSources == p.RateSources && slices.Equal(cur.RateExempt, p.RateExempt)
	if sameSources && cur.MessageRate == p.MessageRate && cur.MessageBurst == p.MessageBurst {
		next.limit = cur.limit
	} else {
		next.limit = ratelimit.New(ratelimit.Options{Rate: p.MessageRate, Burst: p.MessageBurst,
			Sources: p.RateSources, Exempt: p.RateExempt, Clock: s.opt.Clock})
	}
	if cur != nil {
		next.repeats = cur.repeats
	} else {
		next.repeats = ratelimit.NewRecent(s.opt.Clock, &s.cnt.repeatsEvicted)
	}
	if sameSources {
		next.handshakes = cur.handshakes
	} else {
		next.handshakes = ratelimit.New(ratelimit.Options{Rate: TLSHandshakeRate, Burst: TLSHandshakeBurst,
			Sources: p.RateSources, Exempt: p.RateExempt, Clock: s.opt.Clock})
	}
	s.pol.Store(next)
	for c, ss := range s.conns {
		if ss.overTLS && !ss.verified.Load() {
			continue // its handshake is not through: verifyClient applies this policy
		}
		if !next.admits(ss.src, ss.overTLS, ss.account) {
			s.cnt.denied.Add(1)
			s.log.Info("TCP client closed: refused by the new client access list", zap.Stringer("client", c.Remote()))
			_ = c.Close()
		}
	}
}

// admits is the client access rule for an open connection.
func (p *policy) admits(addr netip.Addr, overTLS bool, account string) bool {
	if overTLS && p.ClientCertAllowed != nil {
		return p.ClientCertAllowed(addr, account)
	}
	return p.ClientAllowed == nil || p.ClientAllowed(addr)
}

// errClientRefused fails the TLS handshake of a client the access list
// refuses.
var errClientRefused = errors.New("tcpsearch: client refused by the client access list")

// verifyClient is the TLS listener's VerifyConnection for ss: when a
// client's handshake completes (its certificate, if any, verified), the
// access rule in force decides, before the connection carries any PVA
// message. A refused client fails the handshake: closed, counted, logged
// at most once per interval. (Checked at its first message instead, a
// client that sent none, or only ECHOs, which reset the idle timer, held
// its connection slot.) An admitted client's account is kept for Apply,
// which checks only connections verified before it: a policy stored
// while this runs is applied here (the loop).
func (s *Server) verifyClient(ss *session, cs tls.ConnectionState) error {
	var account string
	if len(cs.PeerCertificates) > 0 {
		account = keychain.Account(cs.PeerCertificates[0])
	}
	ss.account = account
	for {
		pol := s.pol.Load()
		if pol.ClientCertAllowed != nil && !pol.admits(ss.src, true, account) {
			s.cnt.certDenied.Add(1)
			s.ll.Hit("tls_client_refused", "TLS client refused by the client access list (address and certificate)",
				zap.Stringer("client", ss.src), zap.String("certificate_account", account))
			return errClientRefused
		}
		// Without certificate rules the address rule was applied at
		// accept (and Apply applies a new one).
		ss.verified.Store(true)
		if s.pol.Load() == pol {
			return nil
		}
	}
}

// serverTLS is tc with verifyClient run at the end of every handshake,
// for ss. tc's GetConfigForClient (the keychain's, which picks up a
// reloaded keychain) is kept: its configuration gets the check.
func (s *Server) serverTLS(tc *tls.Config, ss *session) *tls.Config {
	check := func(c *tls.Config) *tls.Config {
		prev := c.VerifyConnection
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if prev != nil {
				if err := prev(cs); err != nil {
					return err
				}
			}
			return s.verifyClient(ss, cs)
		}
		return c
	}
	out := check(tc.Clone())
	if get := tc.GetConfigForClient; get != nil {
		out.GetConfigForClient = func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := get(hi)
			if err != nil || c == nil {
				return c, err // nil: out itself, which checks
			}
			return check(c.Clone()), nil
		}
	}
	return out
}

// Server is the name-server listener.
type Server struct {
	opt Options // the Policy fields are read from pol instead
	pol atomic.Pointer[policy]
	res Resolver
	// lookup is res as package answer takes it; rules decide what an
	// answer says (insight, and the counters in cnt).
	lookup  answer.Resolver
	rules   answer.Rules
	log     *zap.Logger
	cnt     counters
	conn    pvaconn.Counters
	budget  pvaconn.Budget
	ll      *limitlog.Log
	denyLog *limitlog.Sources // refused clients: a line per source per minute

	mu       sync.Mutex
	lns      []*net.TCPListener
	tlsLns   []*net.TCPListener
	conns    map[*pvaconn.Conn]*session // open connections
	bySource map[netip.Addr]int         // open connections per source; only sources with one
	closed   bool
	closing  chan struct{}
	wg       sync.WaitGroup // accept loops
}

// denied counts a client refused at accept by the client access list and
// logs it at most once per source per minute: an operator sees who is
// refused, a client retrying in a loop does not fill the log.
func (s *Server) denied(src netip.Addr) {
	s.cnt.denied.Add(1)
	s.denyLog.Hit(src, "TCP client refused by access.tcp_client_allow", zap.Stringer("client", src))
}

// New returns a listener answering from r. Start opens the sockets.
func New(opt Options, r Resolver) *Server {
	if opt.Logger == nil {
		opt.Logger = zap.NewNop()
	}
	s := &Server{opt: opt, res: r, log: opt.Logger, conns: make(map[*pvaconn.Conn]*session),
		bySource: make(map[netip.Addr]int), closing: make(chan struct{}), ll: limitlog.New(opt.Logger, 0, nil),
		denyLog: limitlog.NewSources(opt.Logger, 0, 0, opt.Clock)}
	s.lookup = r
	s.rules = answer.Rules{Insight: opt.Insight, Counters: answer.Counters{NoProtocol: &s.cnt.noProtocol,
		ProtocolSkipped: &s.cnt.protoSkipped, ZeroEndpoint: &s.cnt.zeroEndpoint, LoopbackRewritten: &s.cnt.loopbackRewritten}}
	s.Apply(opt.policy())
	return s
}

// Start is Listen then Serve.
func (s *Server) Start() error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.Serve()
	return nil
}

// Listen opens every configured address without accepting yet, so the
// caller learns the bound port (Addrs) before any client is served. On
// error nothing stays open.
func (s *Server) Listen() error {
	if len(s.opt.Listen) == 0 {
		return errors.New("tcpsearch: no listen address")
	}
	var lns, tlsLns []*net.TCPListener
	fail := func(err error) error {
		for _, l := range append(lns, tlsLns...) {
			l.Close()
		}
		return err
	}
	for _, a := range s.opt.Listen {
		ln, err := listenTCP(a)
		if err != nil {
			return fail(err)
		}
		lns = append(lns, ln)
	}
	if s.opt.TLS != nil {
		for _, a := range s.opt.TLSListen {
			ln, err := listenTCP(a)
			if err != nil {
				return fail(fmt.Errorf("TLS listener: %w", err))
			}
			tlsLns = append(tlsLns, ln)
		}
	}
	s.mu.Lock()
	s.lns, s.tlsLns = lns, tlsLns
	s.mu.Unlock()
	return nil
}

// Serve starts accepting on the sockets Listen opened.
func (s *Server) Serve() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, ln := range s.lns {
		s.log.Info("name server listening", zap.Stringer("addr", ln.Addr()))
		s.wg.Add(1)
		go s.acceptLoop(ln, nil)
	}
	for _, ln := range s.tlsLns {
		s.log.Info("name server listening for TLS (pvas://)", zap.Stringer("addr", ln.Addr()))
		s.wg.Add(1)
		go s.acceptLoop(ln, s.opt.TLS)
	}
}

// TLSAddrs returns the bound addresses of the TLS listener.
func (s *Server) TLSAddrs() []netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return boundAddrs(s.tlsLns)
}

// Addrs returns the bound addresses (with the real port when 0 was asked).
func (s *Server) Addrs() []netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return boundAddrs(s.lns)
}

func boundAddrs(lns []*net.TCPListener) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(lns))
	for _, ln := range lns {
		out = append(out, ln.Addr().(*net.TCPAddr).AddrPort())
	}
	return out
}

// Close stops listening, closes every connection and waits for them.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	for _, ln := range append(s.lns, s.tlsLns...) {
		ln.Close()
	}
	conns := make([]*pvaconn.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.wg.Wait()
	for _, c := range conns {
		c.Close()
	}
	for _, c := range conns {
		<-c.Done()
	}
	return nil
}

// RateStats are the per-source message limiter's counters.
func (s *Server) RateStats() ratelimit.LimiterStats { return s.pol.Load().limit.Stats() }

// acceptor is what the accept loop needs of a listener (tests inject
// failures).
type acceptor interface {
	Accept() (net.Conn, error)
}

// acceptLoop serves ln; with tc, over TLS (the handshake runs on the
// connection's first read and write, under pvaconn's handshake timeout).
func (s *Server) acceptLoop(ln acceptor, tc *tls.Config) {
	defer s.wg.Done()
	backoff := limitlog.Backoff{Log: s.ll, Kind: "tcp_accept"}
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and friends: keep serving the connections we have,
			// retrying after a pause rather than at once (a spin).
			s.cnt.acceptErrors.Add(1)
			backoff.Failed(err, s.closing)
			continue
		}
		backoff.OK()
		var src netip.Addr
		if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
			src = ta.AddrPort().Addr().Unmap()
		}
		pol := s.pol.Load()
		// A TLS client under a certificate rule is checked when its
		// handshake completes, once its certificate is known
		// (verifyClient).
		byCert := tc != nil && pol.ClientCertAllowed != nil
		if allow := pol.ClientAllowed; allow != nil && !byCert && !allow(src) {
			s.denied(src)
			nc.Close()
			continue
		}
		if tc != nil && !pol.handshakes.Allow(src) {
			s.cnt.handshakesLimited.Add(1)
			s.ll.Hit("tls_handshakes_per_source", "TLS handshakes per source limit reached; new TLS connections from it closed before the handshake",
				zap.Stringer("client", src), zap.Int("handshakes_per_second", TLSHandshakeRate), zap.Int("burst", TLSHandshakeBurst))
			nc.Close()
			continue
		}
		s.mu.Lock()
		if cur := s.pol.Load(); cur != pol { // Apply ran since the check above (it stores under mu)
			pol = cur
			byCert = tc != nil && pol.ClientCertAllowed != nil
			if allow := pol.ClientAllowed; allow != nil && !byCert && !allow(src) {
				s.mu.Unlock()
				s.denied(src)
				nc.Close()
				continue
			}
		}
		if s.closed || pol.MaxConns > 0 && s.cnt.active.Load() >= int64(pol.MaxConns) {
			s.mu.Unlock()
			if !s.closed {
				s.cnt.rejected.Add(1)
				s.ll.Hit("tcp_max_connections", "TCP connection limit reached; new connections closed",
					zap.Int("max_connections", pol.MaxConns), zap.Stringer("client", nc.RemoteAddr()))
			}
			nc.Close()
			continue
		}
		if m := pol.MaxConnsPerSource; m > 0 && s.bySource[src] >= m && !pol.exempt(src) {
			s.mu.Unlock()
			s.cnt.perSource.Add(1)
			s.ll.Hit("tcp_connections_per_source", "TCP connections per source limit reached; new connections from it closed",
				zap.Int("max_connections_per_source", m), zap.Stringer("client", src))
			nc.Close()
			continue
		}
		s.bySource[src]++
		s.cnt.active.Add(1)
		s.cnt.accepted.Add(1)
		// Serve under mu: Closed (which deletes) cannot run before the add.
		ss := &session{s: s, src: src, overTLS: tc != nil}
		if tc != nil {
			s.cnt.tlsAccepted.Add(1)
			nc = tls.Server(nc, s.serverTLS(tc, ss))
		}
		if tw := s.opt.Twins; tw != nil {
			// From the connection's start: UDP replies to its host are
			// kept for a pair from then on (udpsearch's stash).
			ss.twin = tw.Join(src, ss.offer)
		}
		c := pvaconn.Serve(nc, pol.Conn, ss)
		ss.conn.Store(c)
		s.conns[c] = ss
		s.mu.Unlock()
	}
}

// closedAtBound logs (once per interval per bound) a connection pvaconn
// closed at one of its bounds; the counters are pvaconn's.
func (s *Server) closedAtBound(c *pvaconn.Conn, err error) {
	var kind string
	switch err {
	case pvaconn.ErrMessageTooLarge:
		kind = "tcp_message_size"
	case pvaconn.ErrBudget:
		kind = "tcp_buffer_budget"
	case pvaconn.ErrSendQueueFull:
		kind = "tcp_send_queue"
	case pvaconn.ErrMessageTimeout, pvaconn.ErrHandshakeTimeout:
		kind = "tcp_read_timeout"
	default:
		return
	}
	s.ll.Hit(kind, "TCP client closed at a bound", zap.Stringer("client", c.Remote()), zap.Error(err))
}

func (p *policy) exempt(a netip.Addr) bool {
	for _, p := range p.RateExempt {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// release gives back a closed connection's share of its source
// (MaxConnsPerSource) as soon as its socket is closed.
func (s *Server) release(src netip.Addr) {
	s.mu.Lock()
	if n := s.bySource[src] - 1; n > 0 {
		s.bySource[src] = n
	} else {
		delete(s.bySource, src)
	}
	s.mu.Unlock()
}

// forget drops c once its teardown is done (Close waits for those it
// lists) and only then gives back its place under MaxConns: a teardown
// waiting for the resolver holds a goroutine, so a source that connects
// and closes in a loop can keep at most MaxConns of them waiting.
func (s *Server) forget(c *pvaconn.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.cnt.active.Add(-1)
}
