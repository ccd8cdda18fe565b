// Package sim runs simulated PVAccess servers for tests, demos and load
// runs: N servers, each with its own GUID, TCP listener, UDP socket and
// name set, behaving on the wire like PVXS 1.5.2 servers serving NTScalar
// double PVs, as a small IOC does. It is the project's one fake PVA
// server: the demo, pvans-sim, the load tool, the prober's tests and the
// chaos tests all use it.
//
// Each server sends beacons (PVXS schedule, or a fixed interval), answers
// UDP and TCP CMD_SEARCH and discovery pings for its names, serves the
// `server` PV RPC (op=channels, op=info) as PVXS does, and serves its
// names: CREATE_CHANNEL, GET_FIELD, GET, PUT (also get-before-put),
// MONITOR (start, stop, pipelined acks), DESTROY_REQUEST and
// DESTROY_CHANNEL. Every name is a counter that moves on once per
// UpdateInterval (1 s), computed from the clock; a PUT sets it, and every
// connection and monitor sees the new value. TCP framing, validation and
// ECHO are package pvaconn's (server role). With Options.Java they behave
// as Phoebus core-pva's Java server instead: no beacons, no `server` PV,
// negative CIDs taken as pings.
//
// A site is controlled while it runs (see control.go for the command
// form): Restart (new GUID, same ports), Kill (silent: sockets open,
// nothing answered, connections held), Revive, Stop (clean close),
// AddServer, SetNames/AddNames/RemoveNames (change count bumped),
// DropConnections, Beacon.
//
// UDP: there is no shared port 5076 in tests. Every server has its own UDP
// socket (ephemeral, or Options.ServerUDPPort+i) on its own address; it
// answers searches sent to it and sends its beacons and replies from it, so
// the datagram source address is the server's. The Site also has one
// fan-out socket (Site.UDPAddr, Options.UDPPort or ephemeral) that hands
// each search to every live server, as servers sharing 5076 behave; each
// server answers from its own socket.
//
// The package owns the simulated servers' sockets and goroutines; it does
// not own name resolution (that is pvans) or the load generator (bench).
package sim

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
)

// Options configures a site. The zero value gives one server with ten
// names on 127.0.0.1, ephemeral ports, the PVXS beacon schedule and no
// beacon destinations.
type Options struct {
	Servers        int // N, default 1
	NamesPerServer int // M, default 10 (ignored for servers given in Names)
	// NameLen is the mean name length. 0 keeps the plain `sim:s<i>:pv<j>`
	// form; otherwise names are padded (deterministically) to lengths
	// spread over [NameLen/2, 3*NameLen/2].
	NameLen int
	// Names gives explicit name sets; Names[i] replaces server i's
	// generated names.
	Names [][]string

	// Host is the listen address of every server (default 127.0.0.1);
	// Addrs[i], when given, overrides it for server i.
	Host  netip.Addr
	Addrs []netip.Addr
	// TCPPort, when non-zero, puts server i's listener on TCPPort+i.
	TCPPort uint16
	// ServerUDPPort, when non-zero, puts server i's UDP socket on
	// ServerUDPPort+i.
	ServerUDPPort uint16
	// UDPPort is the site fan-out socket's port (on Host); 0 = ephemeral.
	UDPPort uint16

	// BeaconDests receive every server's beacons (e.g. 127.0.0.1:<pvans
	// UDP port>). Empty: no beacons are sent.
	BeaconDests []netip.AddrPort
	// BeaconInterval > 0 sends a beacon every interval; 0 follows PVXS:
	// one at start, ten more at 15 s, then every 180 s.
	BeaconInterval time.Duration

	// UpdateInterval is how often every PV's value moves on by one (and
	// its monitors get an update); 0 means once a second, < 0 never.
	UpdateInterval time.Duration

	// Misbehaviour and variants, for the prober's tests.
	BigEndian      bool   // send big endian on TCP (pvAccessCPP on a BE host)
	RefuseChannels bool   // refuse every CREATE_CHANNEL (SID 0xFFFFFFFF, FATAL)
	IgnoreChannels bool   // never answer CREATE_CHANNEL (a server that holds a prober's connection)
	RPCError       string // answer every `server` RPC EXEC with this ERROR status
	NoPing         bool   // ignore discovery pings (searches without names)
	NoTCPSearch    bool   // ignore every search over TCP, named or not
	// Java makes every server behave as Phoebus core-pva's Java PVAServer
	// (org.epics.pva.server; docs/protocol.md, "Phoebus core-pva
	// servers"): it sends no beacons (BeaconDests and Beacon are ignored);
	// it has no `server` PV, and a CREATE_CHANNEL for a name it does not
	// serve (`server` too) is never answered (the Java server logs a
	// WARNING, counted in ServerInfo.UnknownCreates); a searched CID that
	// is negative as a signed 32-bit int is a "list servers" ping,
	// answered with no claim (over UDP with sequence ID 0); each claimed
	// name gets a reply of its own; MustReply is honoured only by a UDP
	// search without names, and a TCP search without names gets no reply.
	Java bool
	// TCPSearchOverUDP answers a TCP search as pvAccessCPP does: over UDP,
	// from the server's UDP socket, to the connection peer's address at
	// the search's reply port (not at all when that is 0).
	TCPSearchOverUDP bool

	// TLS, when set, makes every server a Secure PVAccess server (PVXS's
	// tls branch with a keychain): it also listens for TLS on a second
	// port and answers a search that lists "tls" with that port and
	// protocol "tls" (see onSearch, answerUDP). Beacons still name only
	// the plain port, as PVXS's do.
	TLS *tls.Config
	// TLSPort, when non-zero, puts server i's TLS listener on TLSPort+i.
	TLSPort uint16

	// Version is reported by op=info (default "PVXS 1.5.2 (pvans-sim)").
	Version string
	Clock   clock.Clock // default clock.Real
	// Logf, when set, receives one line per notable event (errors, state
	// changes); never per message.
	Logf func(format string, args ...any)
}

func (o *Options) defaults() error {
	if o.Servers <= 0 {
		o.Servers = 1
	}
	if o.NamesPerServer < 0 {
		return errors.New("sim: NamesPerServer < 0")
	}
	if o.NamesPerServer == 0 {
		o.NamesPerServer = 10
	}
	if !o.Host.IsValid() {
		o.Host = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	if len(o.Addrs) > o.Servers {
		return fmt.Errorf("sim: %d Addrs for %d servers", len(o.Addrs), o.Servers)
	}
	if len(o.Names) > o.Servers {
		return fmt.Errorf("sim: %d name sets for %d servers", len(o.Names), o.Servers)
	}
	if o.TCPPort != 0 && int(o.TCPPort)+o.Servers-1 > 65535 {
		return errors.New("sim: TCPPort range exceeds 65535")
	}
	if o.ServerUDPPort != 0 && int(o.ServerUDPPort)+o.Servers-1 > 65535 {
		return errors.New("sim: ServerUDPPort range exceeds 65535")
	}
	if o.UpdateInterval == 0 {
		o.UpdateInterval = time.Second
	}
	if o.Version == "" {
		o.Version = "PVXS 1.5.2 (pvans-sim)"
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

// GenerateNames returns server i's generated names: `sim:s<i>:pv<j>`,
// padded to spread around meanLen when meanLen > 0. The same arguments
// always give the same names, so a load run can regenerate them.
func GenerateNames(i, m, meanLen int) []string {
	names := make([]string, m)
	for j := range names {
		names[j] = padName("sim:s"+strconv.Itoa(i)+":pv"+strconv.Itoa(j), uint64(i)<<32|uint64(j), meanLen)
	}
	return names
}

// padName extends base with '_' and letters to a length drawn from
// [meanLen/2, 3*meanLen/2] by a hash of key; the base keeps names unique.
func padName(base string, key uint64, meanLen int) string {
	if meanLen <= 0 {
		return base
	}
	h := key*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E5
	h ^= h >> 29
	lo := meanLen / 2
	target := lo + int(h%uint64(meanLen+1))
	if target <= len(base)+1 {
		return base
	}
	b := make([]byte, len(base), target)
	copy(b, base)
	b = append(b, '_')
	for len(b) < target {
		h = h*6364136223846793005 + 1442695040888963407
		b = append(b, 'a'+byte(h>>59)%26)
	}
	return string(b)
}

// State is a server's life state.
type State int

// Server states.
const (
	Running State = iota // answering
	Silent               // sockets open, nothing answered or sent (Kill)
	Stopped              // sockets closed (Stop)
)

func (s State) String() string {
	switch s {
	case Running:
		return "running"
	case Silent:
		return "silent"
	}
	return "stopped"
}

// ServerInfo is a snapshot of one simulated server.
type ServerInfo struct {
	Index       int
	GUID        pva.GUID
	TCP         netip.AddrPort // listener: where clients connect
	TLS         netip.AddrPort // TLS listener (Options.TLS); zero without
	UDP         netip.AddrPort // the server's own UDP socket
	Names       []string       // sorted copy
	ChangeCount uint16
	State       State
	Accepted    int // TCP connections accepted (all incarnations)
	Listings    int // op=channels replies sent (all incarnations)
	// UnknownCreates are CREATE_CHANNEL requests for a name the server
	// does not serve, left unanswered (Options.Java): each one a WARNING
	// in a Java server's log.
	UnknownCreates int
}

// Site is a running set of simulated servers.
type Site struct {
	opts         Options
	connCounters *pvaconn.Counters

	mu      sync.Mutex // guards servers (AddServer appends)
	servers []*server

	udp     *net.UDPConn
	udpAddr netip.AddrPort

	closeOnce sync.Once
	done      chan struct{}
	wg        sync.WaitGroup
}

// Start opens every server's sockets and starts them. The site stops when
// ctx is done or Close is called.
func Start(ctx context.Context, opts Options) (*Site, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	s := &Site{opts: opts, done: make(chan struct{}), connCounters: new(pvaconn.Counters)}
	for i := 0; i < opts.Servers; i++ {
		var names []string
		if i < len(opts.Names) && opts.Names[i] != nil {
			names = append([]string(nil), opts.Names[i]...)
		} else {
			names = GenerateNames(i, opts.NamesPerServer, opts.NameLen)
		}
		if _, err := s.addServer(names); err != nil {
			s.Close()
			return nil, err
		}
	}
	// udp4 for an IPv4 host: on 0.0.0.0 Go would otherwise open a
	// dual-stack IPv6 socket, which IPv4 multicast searches do not reach.
	network := "udp4"
	if !opts.Host.Is4() {
		network = "udp6"
	}
	uc, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(opts.Host, opts.UDPPort)))
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("sim: site UDP socket: %w", err)
	}
	s.udp = uc
	s.udpAddr = uc.LocalAddr().(*net.UDPAddr).AddrPort()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		serveUDP(uc, s.live)
	}()
	if ctx != nil && ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				s.Close()
			case <-s.done:
			}
		}()
	}
	return s, nil
}

// addServer starts server number len(servers): its address and ports
// follow Options as the first servers' do.
func (s *Site) addServer(names []string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := len(s.servers)
	opts := &s.opts
	addr := opts.Host
	if i < len(opts.Addrs) && opts.Addrs[i].IsValid() {
		addr = opts.Addrs[i]
	}
	var tcpPort, udpPort uint16
	if opts.TCPPort != 0 {
		if int(opts.TCPPort)+i > 65535 {
			return 0, errors.New("sim: TCPPort range exceeds 65535")
		}
		tcpPort = opts.TCPPort + uint16(i)
	}
	if opts.ServerUDPPort != 0 {
		if int(opts.ServerUDPPort)+i > 65535 {
			return 0, errors.New("sim: ServerUDPPort range exceeds 65535")
		}
		udpPort = opts.ServerUDPPort + uint16(i)
	}
	srv := newServer(s, i, addr, tcpPort, udpPort, names)
	if opts.TLSPort != 0 {
		if int(opts.TLSPort)+i > 65535 {
			return 0, errors.New("sim: TLSPort range exceeds 65535")
		}
		srv.tlsPort = opts.TLSPort + uint16(i)
	}
	if err := srv.start(); err != nil {
		return 0, fmt.Errorf("sim: server %d: %w", i, err)
	}
	s.servers = append(s.servers, srv)
	return i, nil
}

func (s *Site) list() []*server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.servers
}

// live returns the running servers' current incarnations, for the fan-out
// socket.
func (s *Site) live() []*instance {
	servers := s.list()
	out := make([]*instance, 0, len(servers))
	for _, srv := range servers {
		if in := srv.current(); in != nil {
			out = append(out, in)
		}
	}
	return out
}

// UDPAddr is the site fan-out socket: a search sent here is answered by
// every running server that claims a name (each from its own socket).
func (s *Site) UDPAddr() netip.AddrPort { return s.udpAddr }

// Len is the number of servers (stopped ones included).
func (s *Site) Len() int { return len(s.list()) }

// Server returns a snapshot of server i.
func (s *Site) Server(i int) ServerInfo { return s.list()[i].info() }

// Servers returns snapshots of every server.
func (s *Site) Servers() []ServerInfo {
	servers := s.list()
	out := make([]ServerInfo, len(servers))
	for i, srv := range servers {
		out[i] = srv.info()
	}
	return out
}

// AllNames returns every server's names, server by server.
func (s *Site) AllNames() []string {
	var out []string
	for _, srv := range s.list() {
		out = append(out, srv.info().Names...)
	}
	return out
}

func (s *Site) get(i int) (*server, error) {
	select {
	case <-s.done:
		return nil, errors.New("sim: site closed")
	default:
	}
	servers := s.list()
	if i < 0 || i >= len(servers) {
		return nil, fmt.Errorf("sim: no server %d", i)
	}
	return servers[i], nil
}

// Restart stops server i (closing its sockets and connections) and starts
// it again on the same TCP and UDP ports with a new GUID, a new beacon
// schedule and change count 0: what a restarted IOC looks like.
func (s *Site) Restart(i int) error {
	srv, err := s.get(i)
	if err != nil {
		return err
	}
	return srv.restart()
}

// Kill makes server i silent: its sockets stay open (TCP connections are
// not closed, new ones are accepted), but nothing is answered or sent, no
// beacons, no echo replies. A client notices only by timeouts.
func (s *Site) Kill(i int) error {
	srv, err := s.get(i)
	if err != nil {
		return err
	}
	srv.silence()
	return nil
}

// Revive ends server i's silence: held TCP connections resume (what was
// sent meanwhile is answered now), beacons and UDP answers start again.
func (s *Site) Revive(i int) error {
	srv, err := s.get(i)
	if err != nil {
		return err
	}
	if !srv.revive() {
		return fmt.Errorf("sim: server %d is stopped", i)
	}
	return nil
}

// MuteTLSSearches stops (on) or restarts server i answering UDP searches
// that list "tls": its TLS answer is late, so a searcher that searched
// plainly too hears the plain answer first, whatever the scheduling.
func (s *Site) MuteTLSSearches(i int, on bool) error {
	srv, err := s.get(i)
	if err != nil {
		return err
	}
	srv.muteTLS.Store(on)
	return nil
}

// DropConnections closes server i's TCP connections cleanly (peers see
// FIN) and keeps it running: new connections are accepted.
func (s *Site) DropConnections(i int) error {
	srv, err := s.get(i)
	if err != nil {
		return err
	}
	srv.dropConns()
	return nil
}

// AddServer starts one more server with these names and returns its
// index.
func (s *Site) AddServer(names []string) (int, error) {
	select {
	case <-s.done:
		return 0, errors.New("sim: site closed")
	default:
	}
	return s.addServer(append([]string(nil), names...))
}

// Beacon sends one beacon from server i to dest now (with the current
// change count), besides the schedule; a silent or stopped server sends
// nothing.
func (s *Site) Beacon(i int, dest netip.AddrPort) error {
	srv, err := s.get(i)
	if err != nil {
		return err
	}
	in := srv.current()
	if in == nil {
		return fmt.Errorf("sim: server %d is not running", i)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.sendBeacon([]netip.AddrPort{dest})
	return nil
}

// Stop closes server i's sockets and connections cleanly (peers see the
// TCP connections close).
func (s *Site) Stop(i int) error {
	srv, err := s.get(i)
	if err != nil {
		return err
	}
	srv.stop()
	return nil
}

// SetNames replaces server i's names and bumps its beacon change count.
func (s *Site) SetNames(i int, names []string) error {
	srv, err := s.get(i)
	if err != nil {
		return err
	}
	srv.setNames(append([]string(nil), names...))
	return nil
}

// AddNames adds names to server i's set (those it has already are kept
// once) and bumps its change count.
func (s *Site) AddNames(i int, names ...string) error {
	srv, err := s.get(i)
	if err != nil {
		return err
	}
	srv.setNames(append(slices.Clone(srv.names.Load().ordered), names...))
	return nil
}

// RemoveNames removes names from server i's set and bumps its change
// count.
func (s *Site) RemoveNames(i int, names ...string) error {
	srv, err := s.get(i)
	if err != nil {
		return err
	}
	drop := make(map[string]bool, len(names))
	for _, n := range names {
		drop[n] = true
	}
	keep := slices.DeleteFunc(slices.Clone(srv.names.Load().ordered), func(n string) bool { return drop[n] })
	srv.setNames(keep)
	return nil
}

// Close stops every server and the fan-out socket, and waits for the
// goroutines to end.
func (s *Site) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		for _, srv := range s.list() {
			srv.stop()
		}
		if s.udp != nil {
			s.udp.Close()
		}
	})
	s.wg.Wait()
	return nil
}

func newGUID() pva.GUID {
	var g pva.GUID
	_, _ = rand.Read(g[:])
	return g
}
