package udpsearch

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/ratelimit"
)

// Server is pvans on the search port: per address family one shared
// wildcard socket, a client socket for its own searches, and (optionally)
// a beacon socket. IPv4 is always served; with Options.IPv6 IPv6 is
// served beside it, as PVXS binds [::] beside 0.0.0.0.
type Server struct {
	o   Options // the Policy fields are read from pol instead
	pol atomic.Pointer[policy]
	st  counters
	ifs atomic.Pointer[ifaceTable]

	fam  [2]*family   // by ip4, ip6
	fwd  *net.UDPConn // forwarder (forward.go)
	diag *sockDiag
	pace *pacing // the search port handlers' (nil: no pacing)
	// unpaced sends re-answers from its timer when there is no pacing
	// (Reanswer); nil with pacing.
	unpaced *pacing
	// beacons exists from Start on; it beacons while SendBeacons is on
	// (SetSendBeacons switches it).
	beacons atomic.Pointer[beaconer]
	bq      *beaconQueue // nil without a BeaconSink

	// sendMu serialises sends from the client socket: a multicast
	// destination sets the socket's TTL and interface for its send.
	sendMu      sync.Mutex
	dests       []sendDest
	beaconDests []sendDest

	// expect holds the endpoints asked directly (Expect), by host, until
	// when their UDP answers count as solicited; nExpect counts them.
	expMu   sync.Mutex
	expect  map[netip.Addr][]expectation
	nExpect int

	mu         sync.Mutex
	closed     bool
	lastReload time.Time
	refresh    clock.Timer
	wg         sync.WaitGroup
}

// The families, as indexes of Server.fam.
const (
	ip4 = iota
	ip6
)

// family is the search port in one address family: its sockets and the
// handlers that read them.
type family struct {
	// search is the search port's wildcard socket, client the socket
	// pvans searches from (discovery pings, search-through); nil until
	// Listen, and for IPv6 while it is off or the host has none.
	search, client *net.UDPConn
	// beacon sends pvans's own beacons; nil until they are first on.
	// Guarded by sendMu.
	beacon *net.UDPConn
	// listenClient opens a socket like client (a beacon socket too):
	// listenEphemeral or listenEphemeral6.
	listenClient func(port uint16, rcvbuf int) (*net.UDPConn, error)

	h, ch *handler // the search port's and the client socket's
	// batch is h's sender when it queues the replies to one receive batch
	// for one sendmmsg after it (batchReplies); nil: h sends each at once.
	batch *sockSender
	// searchDrops and clientDrops count the sockets' SO_RXQ_OVFL drops.
	searchDrops, clientDrops *metrics.Counter
}

// famOf is the family that sends to and receives from a.
func (s *Server) famOf(a netip.Addr) *family {
	if a.Is4() {
		return s.fam[ip4]
	}
	return s.fam[ip6]
}

// open is the families Listen opened: IPv4, with IPv6 after it when on.
func (s *Server) open() []*family {
	switch {
	case s.fam[ip6].search != nil:
		return s.fam[:]
	case s.fam[ip4].search != nil:
		return s.fam[:1]
	}
	return nil
}

// rx wires one receiving socket to its handler: a row of the table Start
// runs a receive goroutine for (receivers).
type rx struct {
	conn   *net.UDPConn
	batch  int // datagrams one receive call may return
	handle func(*datagram)
	// flush, when set, holds the handler's replies to each receive batch;
	// they go out in one sendmmsg after it.
	flush *sockSender
	drops *metrics.Counter // where the socket's SO_RXQ_OVFL drops are counted
}

// clientBatch is the client socket's receive batch: replies to pvans's own
// searches, far fewer than the searches the search port takes.
const clientBatch = 4

// receivers is the table of receiving sockets: the search port and client
// sockets of each open family.
func (s *Server) receivers() []rx {
	var t []rx
	for _, f := range s.open() {
		t = append(t,
			rx{conn: f.search, batch: s.o.Batch, handle: f.h.handle, flush: f.batch, drops: f.searchDrops},
			rx{conn: f.client, batch: clientBatch, handle: f.ch.handleClient, drops: f.clientDrops})
	}
	return t
}

// New makes a server that opens no socket yet, so its owner can wire
// every part before anything arrives.
func New(o Options) *Server {
	o.setDefaults()
	s := &Server{o: o}
	if o.Beacons != nil {
		s.bq = newBeaconQueue(o.Beacons, max(o.BeaconQueue, 0), &s.st, o.Logger)
		s.o.Beacons = s.bq
	}
	s.pol.Store(newPolicy(o.policy(), nil, o.Clock, &s.st.repeatsEvicted))
	s.pace = newPacing(&s.o, &s.st)
	if s.pace == nil {
		s.unpaced = &pacing{q: &replyQueue{clk: s.o.Clock, max: s.o.ReplyQueueBytes, st: &s.st}}
	}
	s.fam = [2]*family{
		{listenClient: listenEphemeral, searchDrops: &s.st.kernelDrops, clientDrops: &s.st.clientKernelDrops},
		{listenClient: listenEphemeral6, searchDrops: &s.st.kernelDrops, clientDrops: &s.st.clientKernelDrops},
	}
	for _, f := range s.fam {
		f.h, f.ch = s.newHandler(), s.newHandler()
		f.h.pace = s.pace
		f.ch.dests, f.ch.expected = s.SearchDestinations, s.expected
	}
	if o.Twins != nil {
		// What waits in the pacer for a client found to have its own TCP
		// connection goes over it now.
		o.Twins.OnPair(s.pace.onPair)
	}
	return s
}

// newHandler makes a handler under the server's policy, which re-reads
// the interface table through the server.
func (s *Server) newHandler() *handler {
	h := newHandler(&s.o, &s.st, &s.ifs, nil)
	h.reload, h.pol = s.reloadLimited, &s.pol
	return h
}

// Apply applies a new policy from the next datagram on. A changed
// rate, burst, ratio, window or exemption list starts new limiters (every
// source begins with a full burst); otherwise they are kept.
func (s *Server) Apply(p Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pol.Store(newPolicy(p, s.pol.Load(), s.o.Clock, &s.st.repeatsEvicted))
}

// SetReceiveBuffer sets SO_RCVBUF of the search port and client sockets
// (a reload of udp.receive_buffer_bytes). n <= 0 changes nothing: the OS
// default a socket was opened with cannot be asked back. Before Listen it
// only changes what Listen will ask.
func (s *Server) SetReceiveBuffer(n int) error {
	if n <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open() == nil || s.closed {
		s.o.ReceiveBuffer = n
		return nil
	}
	var err error
	for _, f := range s.open() {
		err = errors.Join(err, setReceiveBuffer(f.search, n), setReceiveBuffer(f.client, n))
	}
	return err
}

// SetDestinations replaces where SendSearch and the beacons go, from the
// next send on (after Listen; interface names are looked up in the
// calling thread's network namespace, as Listen does).
func (s *Server) SetDestinations(addrList, beaconAddrList []Destination) {
	dests, beaconDests := resolveDests(addrList, s.warnDest), resolveDests(beaconAddrList, s.warnDest)
	s.sendMu.Lock()
	s.dests, s.beaconDests = dests, beaconDests
	s.sendMu.Unlock()
}

func (s *Server) warnDest(d Destination) {
	s.o.Logger.Warn("multicast destination names an unknown interface; the routing table decides",
		zap.Stringer("destination", d))
}

// SetTCPPort sets the name-server port that discovery answers and beacons
// carry, for an owner that learns it only once its TCP listener is bound.
// Call it before Start.
func (s *Server) SetTCPPort(port uint16) { s.o.TCPPort = port }

// Listen reads the interface table and opens the sockets; nothing is
// received until Start. On error nothing stays open.
func (s *Server) Listen() (err error) {
	o := &s.o
	ifs, err := o.ListInterfaces()
	if err != nil {
		return err
	}
	s.ifs.Store(newIfaceTable(ifs))
	s.lastReload = o.Clock.Now()
	s.sendMu.Lock()
	s.dests = resolveDests(o.AddrList, s.warnDest)
	s.beaconDests = resolveDests(o.BeaconAddrList, s.warnDest)
	s.sendMu.Unlock()

	v4, v6 := s.fam[ip4], s.fam[ip6]
	if v4.search, err = listenSearchPort(o.Port, o.ReceiveBuffer); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			s.closeSockets()
		}
	}()
	if v4.client, err = listenEphemeral(0, o.ReceiveBuffer); err != nil {
		return err
	}
	if o.IPv6 {
		if err = s.listen6(); err != nil {
			return err
		}
	}
	if o.SendBeacons {
		if err = s.openBeacons(); err != nil {
			return err
		}
	}
	if err = s.joinGroups(); err != nil {
		return err
	}
	out := s.newSender()
	if err = s.listenForward(out); err != nil {
		return err
	}
	v4.h.out, v4.ch.out = out, out
	// The IPv6 handlers run on goroutines of their own: their own sender
	// (its control-message scratch is per sender). IPv6 is never forwarded.
	out6 := s.newSender()
	v6.h.out, v6.ch.out = out6, out6
	s.batchReplies(v4, out)
	for _, pc := range [...]*pacing{s.pace, s.unpaced} {
		if pc != nil {
			// The queue sends from its timer: a sender of its own.
			pc.q.setSender(s.newSender())
		}
	}
	return nil
}

// newSender is a sender on the search port sockets: each reply leaves
// from the one of its destination's family.
func (s *Server) newSender() *sockSender {
	return newSockSender(s.fam[ip4].search, s.fam[ip6].search, &s.st, s.o.Port)
}

// listen6 opens the IPv6 search port and client sockets. A host without
// IPv6 is not an error: it is logged and pvans runs on IPv4 alone. On
// error the caller closes what is open.
func (s *Server) listen6() (err error) {
	o := &s.o
	v4, v6 := s.fam[ip4], s.fam[ip6]
	if v6.search, err = listenSearchPort6(o.Port, o.ReceiveBuffer); err != nil {
		if errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.EADDRNOTAVAIL) {
			o.Logger.Warn("no IPv6 on this host: the UDP participant runs on IPv4 only", zap.Error(err))
			return nil
		}
		return err
	}
	// The client sockets share one port number, so the reply port in
	// pvans's searches is right for both families. An ephemeral IPv4 port
	// may be taken in IPv6: try another.
	for try := 0; ; try++ {
		port := v4.client.LocalAddr().(*net.UDPAddr).AddrPort().Port()
		if v6.client, err = listenEphemeral6(port, o.ReceiveBuffer); err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) || try == 16 {
			return err
		}
		v4.client.Close()
		if v4.client, err = listenEphemeral(0, o.ReceiveBuffer); err != nil {
			return err
		}
	}
}

// openBeacons opens a beacon socket for each open family that has none,
// IPv6's even without IPv6 destinations (a reload may add some).
func (s *Server) openBeacons() error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	for _, f := range s.open() {
		if f.beacon != nil {
			continue
		}
		c, err := f.listenClient(0, 0)
		if err != nil {
			return err
		}
		f.beacon = c
	}
	return nil
}

// joinGroups joins Options.Groups on the search port sockets.
func (s *Server) joinGroups() error {
	for _, g := range resolveDests(s.o.Groups, s.warnDest) {
		conn := s.famOf(g.Addr.Addr()).search
		if conn == nil {
			return fmt.Errorf("search group %s: %w", g.Destination, errNoIPv6)
		}
		if err := joinGroup(conn, &g); err != nil {
			return fmt.Errorf("join search group %s: %w", g.Destination, err)
		}
	}
	return nil
}

// closeSockets closes every socket of every family that is open (closing
// one again, after a failed Listen, is harmless).
func (s *Server) closeSockets() error {
	var err error
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	for _, f := range s.fam {
		for _, c := range [...]*net.UDPConn{f.search, f.client, f.beacon} {
			if c != nil {
				err = errors.Join(err, c.Close())
			}
		}
	}
	return err
}

// Start begins receiving, refreshing the interface table and beaconing on
// the sockets Listen opened.
func (s *Server) Start() {
	o := &s.o
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.bq != nil {
		s.bq.start()
	}
	// pvans's own searches (search-through, from the client sockets) are
	// answered like anyone's but are not a client's traffic for insight.
	for i, f := range s.open() {
		f.h.ownClient[i] = f.client.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	}
	for _, r := range s.receivers() {
		s.wg.Add(1)
		go s.rxLoop(r)
	}

	if o.InterfaceRefresh > 0 {
		s.refresh = o.Clock.AfterFunc(o.InterfaceRefresh, s.periodicRefresh)
	}
	b := newBeaconer(o.Clock, o.GUID, o.TCPPort, s.sendBeacon)
	s.beacons.Store(b)
	if o.SendBeacons {
		b.start()
	}
}

// SetSendBeacons starts or stops pvans's own beacons (a reload of
// udp.send_beacons). Started again, the schedule begins anew (a beacon at
// once, then the fast ones); the change count carries on. Before Start it
// only changes what Start does.
func (s *Server) SetSendBeacons(on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.beacons.Load()
	if b == nil || s.closed {
		s.o.SendBeacons = on
		return nil
	}
	if !on {
		b.stop()
		return nil
	}
	if err := s.openBeacons(); err != nil {
		return err
	}
	b.resume()
	return nil
}

// kernelDrops is one socket's SO_RXQ_OVFL as last seen: the socket's
// running total (modulo 2^32), from 0 when it is opened. What it grew by
// is counted, so both families' and a reopened socket's drops add up in
// one counter, which never goes back.
type kernelDrops struct{ seen uint32 }

// note counts into c what the socket's total drops grew by.
func (k *kernelDrops) note(c *metrics.Counter, drops uint32) {
	if drops != k.seen {
		c.Add(uint64(drops - k.seen))
		k.seen = drops
	}
}

// rxLoop receives on r's socket until it is closed.
func (s *Server) rxLoop(r rx) {
	defer s.wg.Done()
	rc, err := r.conn.SyscallConn()
	if err != nil {
		return
	}
	rb := newRxBatch(r.batch, maxDatagram)
	var d datagram
	var drops uint32
	var kd kernelDrops
	_ = rb.serve(rc, func(k int) {
		for i := 0; i < k; i++ {
			have := false
			ok := rb.fill(i, &d, &drops, &have)
			if have {
				kd.note(r.drops, drops)
			}
			if !ok {
				s.st.dropTruncated.Add(1)
				continue
			}
			r.handle(&d)
		}
		if r.flush != nil {
			r.flush.flush()
		}
	})
}

// LocalAddr is the IPv4 search port socket's address (wildcard:port).
func (s *Server) LocalAddr() netip.AddrPort {
	return s.fam[ip4].search.LocalAddr().(*net.UDPAddr).AddrPort()
}

// ClientAddr is the IPv4 client socket's address (wildcard:ephemeral); the
// IPv6 one has the same port.
func (s *Server) ClientAddr() netip.AddrPort {
	return s.fam[ip4].client.LocalAddr().(*net.UDPAddr).AddrPort()
}

// ClientSearches is the datagrams SendSearch sent (one per destination).
func (s *Server) ClientSearches() uint64 { return s.st.clientSearches.Load() }

// LimitStats are the search-rate limiter's and the reflection cap's own
// counters (sources remembered, evictions); zero when they are off.
func (s *Server) LimitStats() (ratelimit.LimiterStats, ratelimit.ReflectionStats) {
	p := s.pol.Load()
	return p.limit.Stats(), p.refl.Stats()
}

// SendSearch sends one finished CMD_SEARCH datagram (a discovery ping or a
// search-through search, built by the caller with its own reply port from
// ClientAddr) from the client socket to every AddrList destination, with
// the Unicast flag set or cleared per destination as a PVXS client does
// (see UnicastDestination): a pvAccessCPP server sharing the host forwards
// a unicast search to the other local servers only when the flag is set.
// The datagram is edited in place. sent, if not nil, is told each
// destination's outcome. SendSearch returns the first send error; the
// other destinations are still tried.
func (s *Server) SendSearch(datagram []byte, sent func(to netip.AddrPort, err error)) error {
	if s.fam[ip4].client == nil {
		return errNotOpen
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	var first error
	for i := range s.dests {
		d := &s.dests[i]
		pva.SetSearchUnicast(datagram, s.UnicastDestination(d.Addr.Addr()))
		err := sendTo(s.famOf(d.Addr.Addr()).client, datagram, d)
		if err != nil {
			s.st.sendErrors.Add(1)
			if first == nil {
				first = err
			}
		} else {
			s.st.clientSearches.Add(1)
		}
		if sent != nil {
			sent(d.Addr, err)
		}
	}
	return first
}

// SendSearchTo sends one finished CMD_SEARCH datagram, as SendSearch does,
// to the given unicast addresses instead of the AddrList (a discovery
// ping to the trusted relays). It returns the first send error.
func (s *Server) SendSearchTo(datagram []byte, to []netip.AddrPort) error {
	if s.fam[ip4].client == nil {
		return errNotOpen
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	var first error
	for _, a := range to {
		pva.SetSearchUnicast(datagram, s.UnicastDestination(a.Addr()))
		d := sendDest{Destination: Destination{Addr: a, TTL: -1}}
		if err := sendTo(s.famOf(a.Addr()).client, datagram, &d); err != nil {
			s.st.sendErrors.Add(1)
			if first == nil {
				first = err
			}
		} else {
			s.st.clientSearches.Add(1)
		}
	}
	return first
}

// maxExpected bounds the endpoints Expect remembers at once.
const maxExpected = 256

// expectation is one endpoint asked directly, answered over UDP until.
type expectation struct {
	port  uint16
	until time.Time
}

// Expect makes UDP search replies from ep's host that name ep count as
// solicited for d: pvans asked that server directly (a TCP search to an
// unlistable server, which a pvAccessCPP server answers over UDP, from its
// own address, naming its own port). Beyond maxExpected endpoints at once
// it is ignored.
func (s *Server) Expect(ep netip.AddrPort, d time.Duration) {
	now := s.o.Clock.Now()
	a := ep.Addr().Unmap()
	s.expMu.Lock()
	defer s.expMu.Unlock()
	if s.expect == nil {
		s.expect = make(map[netip.Addr][]expectation)
	}
	for i, e := range s.expect[a] {
		if e.port == ep.Port() {
			s.expect[a][i].until = now.Add(d)
			return
		}
	}
	if s.nExpect >= maxExpected {
		for k, es := range s.expect {
			live := es[:0]
			for _, e := range es {
				if !now.After(e.until) {
					live = append(live, e)
				}
			}
			s.nExpect -= len(es) - len(live)
			if len(live) == 0 {
				delete(s.expect, k)
			} else {
				s.expect[k] = live
			}
		}
		if s.nExpect >= maxExpected {
			return
		}
	}
	s.expect[a] = append(s.expect[a], expectation{port: ep.Port(), until: now.Add(d)})
	s.nExpect++
}

// expected reports whether pvans asked a server at a directly and awaits
// its answer: on port, or on any port when port is 0.
func (s *Server) expected(a netip.Addr, port uint16) bool {
	now := s.o.Clock.Now()
	s.expMu.Lock()
	defer s.expMu.Unlock()
	for _, e := range s.expect[a] {
		if (port == 0 || e.port == port) && !now.After(e.until) {
			return true
		}
	}
	return false
}

// SearchDestinations is where SendSearch sends now (Options.AddrList, or
// the last SetDestinations).
func (s *Server) SearchDestinations() []netip.AddrPort {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	out := make([]netip.AddrPort, len(s.dests))
	for i, d := range s.dests {
		out[i] = d.Addr
	}
	return out
}

// UnicastDestination is the PVXS client's rule for the Unicast search flag
// (client.cpp, ContextImpl ctor): a destination is unicast unless it is a
// multicast group or an IPv4 broadcast address of one of the host's
// interfaces. As in PVXS the limited broadcast 255.255.255.255, which is
// no interface's broadcast address, counts as unicast.
func (s *Server) UnicastDestination(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsMulticast() {
		return false
	}
	if t := s.ifs.Load(); t != nil && a.Is4() && t.bcast[a] {
		return false
	}
	return true
}

// Relayable reports whether a trusted relay may name a as a server's
// address: the rule hints over UDP follow, for the daemon to apply to a
// relay's TCP answers as well.
func (s *Server) Relayable(a netip.Addr) bool { return relayable(s.ifs.Load(), a) }

// Broadcast reports whether a is a broadcast address of this host's
// networks (the relay does not send to one unless told to).
func (s *Server) Broadcast(a netip.Addr) bool {
	t := s.ifs.Load()
	return t != nil && t.bcast[a.Unmap()]
}

// BumpChangeCount records that pvans's own served set changed; the next
// beacons carry the new change count.
func (s *Server) BumpChangeCount() {
	if b := s.beacons.Load(); b != nil {
		b.bump()
	}
}

// BeaconNow sends one of pvans's own beacons now, out of schedule (the
// schedule carries on), when beacons are on: a server pvans answers for
// restarted. At most one a second (promptBeaconGap).
func (s *Server) BeaconNow() {
	if b := s.beacons.Load(); b != nil {
		b.prompt()
	}
}

func (s *Server) sendBeacon(b []byte) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	for i := range s.beaconDests {
		d := &s.beaconDests[i]
		if err := sendTo(s.famOf(d.Addr.Addr()).beacon, b, d); err != nil {
			s.st.sendErrors.Add(1)
			continue
		}
		s.st.beaconsSent.Add(1)
	}
}

var (
	errNoIPv6  = errors.New("udpsearch: IPv6 destination but no IPv6 socket (Options.IPv6 off, or no IPv6 on this host)")
	errNotOpen = errors.New("udpsearch: sockets not open")
)

// sendTo sends b to d from conn, a socket of d's family (nil: none open),
// with d's TTL and interface when d is a multicast group.
func sendTo(conn *net.UDPConn, b []byte, d *sendDest) error {
	if conn == nil {
		if d.Addr.Addr().Is4() {
			return errNotOpen
		}
		return errNoIPv6
	}
	if d.multicast {
		if err := prepMulticast(conn, d); err != nil {
			return err
		}
	}
	_, err := conn.WriteToUDPAddrPort(b, d.Addr)
	return err
}

// RefreshInterfaces re-reads the interface table now.
func (s *Server) RefreshInterfaces() error {
	ifs, err := s.o.ListInterfaces()
	if err != nil {
		return err
	}
	s.ifs.Store(newIfaceTable(ifs))
	s.st.interfaceReload.Add(1)
	s.mu.Lock()
	s.lastReload = s.o.Clock.Now()
	s.mu.Unlock()
	return nil
}

// reloadLimited is the handler's reaction to an unknown interface: re-read
// the table, at most once a second, so a flood from a new interface costs
// one netlink dump a second, not one per datagram.
func (s *Server) reloadLimited() *ifaceTable {
	s.mu.Lock()
	recent := s.o.Clock.Now().Sub(s.lastReload) < time.Second
	s.mu.Unlock()
	if !recent {
		_ = s.RefreshInterfaces()
	}
	return s.ifs.Load()
}

func (s *Server) periodicRefresh() {
	_ = s.RefreshInterfaces()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.refresh = s.o.Clock.AfterFunc(s.o.InterfaceRefresh, s.periodicRefresh)
	}
}

// Close stops beacons and closes the sockets, waiting for the receive
// goroutines to finish.
func (s *Server) Close() error {
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	if first && s.refresh != nil {
		s.refresh.Stop()
	}
	s.mu.Unlock()
	if !first {
		return nil
	}
	if b := s.beacons.Load(); b != nil {
		b.stop()
	}
	if s.bq != nil {
		s.bq.close()
	}
	s.pace.close()
	s.unpaced.close()
	if s.open() == nil {
		return nil // never listened
	}
	err := errors.Join(s.closeSockets(), s.fwd.Close())
	s.wg.Wait()
	return errors.Join(err, s.closeForward())
}
