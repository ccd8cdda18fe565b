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
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/ratelimit"
)

// Server is pvans on the search port: one shared wildcard socket, a client
// socket for its own searches, and (optionally) a beacon socket; with
// Options.IPv6 the same again for IPv6 beside them, as PVXS binds [::]
// beside 0.0.0.0.
type Server struct {
	o   Options // the Policy fields are read from pol instead
	pol atomic.Pointer[policy]
	st  counters
	ifs atomic.Pointer[ifaceTable]

	main, client, beaconConn *net.UDPConn // beaconConn: sendMu
	fwd                      *net.UDPConn // forwarder (forward.go)
	diag                     *sockDiag
	mainOut                  *sockSender // the search port handler's, batching replies
	h, ch                    *handler
	pace                     *pacing // the search port handlers' (nil: no pacing)
	// IPv6 (Options.IPv6): nil when not open. beaconConn6: sendMu.
	main6, client6, beaconConn6 *net.UDPConn
	h6, ch6                     *handler
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

// New makes a server that opens no socket yet, so its owner can wire
// every part before anything arrives.
func New(o Options) *Server {
	o.setDefaults()
	s := &Server{o: o}
	if o.Beacons != nil {
		s.bq = newBeaconQueue(o.Beacons, o.BeaconQueue, &s.st, o.Logger)
		s.o.Beacons = s.bq
	}
	s.pol.Store(newPolicy(o.policy(), nil, o.Clock))
	s.h = newHandler(&s.o, &s.st, &s.ifs, nil)
	s.h.reload = s.reloadLimited
	s.ch = newHandler(&s.o, &s.st, &s.ifs, nil)
	s.h6 = newHandler(&s.o, &s.st, &s.ifs, nil)
	s.h6.reload = s.reloadLimited
	s.ch6 = newHandler(&s.o, &s.st, &s.ifs, nil)
	s.ch.reload, s.ch6.reload = s.reloadLimited, s.reloadLimited
	s.h.pol, s.ch.pol, s.h6.pol, s.ch6.pol = &s.pol, &s.pol, &s.pol, &s.pol
	s.pace = newPacing(&s.o, &s.st)
	s.h.pace, s.h6.pace = s.pace, s.pace
	s.ch.dests, s.ch.expected = s.SearchDestinations, s.expected
	if o.Twins != nil {
		// What waits in the pacer for a client found to have its own TCP
		// connection goes over it now.
		o.Twins.OnPair(s.pace.onPair)
	}
	return s
}

// SetPolicy applies a new policy from the next datagram on. A changed
// rate, burst, ratio, window or exemption list starts new limiters (every
// source begins with a full burst); otherwise they are kept.
func (s *Server) SetPolicy(p Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pol.Store(newPolicy(p, s.pol.Load(), s.o.Clock))
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
	if s.main == nil || s.closed {
		s.o.ReceiveBuffer = n
		return nil
	}
	err := errors.Join(setReceiveBuffer(s.main, n), setReceiveBuffer(s.client, n))
	if s.main6 != nil {
		err = errors.Join(err, setReceiveBuffer(s.main6, n), setReceiveBuffer(s.client6, n))
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

	if s.main, err = listenSearchPort(o.Port, o.ReceiveBuffer); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			s.closeListened()
		}
	}()
	if s.client, err = listenEphemeral(o.ReceiveBuffer); err != nil {
		return err
	}
	if o.SendBeacons {
		s.sendMu.Lock()
		s.beaconConn, err = listenEphemeral(0)
		s.sendMu.Unlock()
		if err != nil {
			return err
		}
	}
	if o.IPv6 {
		if err = s.listen6(); err != nil {
			return err
		}
	}
	if err = s.joinGroups(); err != nil {
		return err
	}
	out := newSockSender(s.main, s.main6, &s.st, o.Port)
	if err = s.listenForward(out); err != nil {
		return err
	}
	s.h.out, s.ch.out = out, out
	// The IPv6 handlers run on goroutines of their own: their own sender
	// (its control-message scratch is per sender). IPv6 is never forwarded.
	out6 := newSockSender(s.main, s.main6, &s.st, o.Port)
	s.h6.out, s.ch6.out = out6, out6
	s.batchReplies(out)
	if s.pace != nil {
		// The queue sends from its timer: a sender of its own.
		s.pace.q.setSender(newSockSender(s.main, s.main6, &s.st, o.Port))
	}
	return nil
}

// closeListened closes what a failed Listen opened (listen6 closes its
// own sockets on failure; closing them again is harmless).
func (s *Server) closeListened() {
	s.main.Close()
	if s.client != nil {
		s.client.Close()
	}
	if s.beaconConn != nil {
		s.beaconConn.Close()
	}
	s.close6()
}

// listen6 opens the IPv6 sockets. A host without IPv6 is not an error: it
// is logged and pvans runs on IPv4 alone. On error nothing IPv6 stays
// open.
func (s *Server) listen6() (err error) {
	o := &s.o
	if s.main6, err = listenSearchPort6(o.Port, o.ReceiveBuffer); err != nil {
		if errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.EADDRNOTAVAIL) {
			o.Logger.Warn("no IPv6 on this host: the UDP participant runs on IPv4 only", zap.Error(err))
			return nil
		}
		return err
	}
	defer func() {
		if err != nil {
			s.close6()
		}
	}()
	// The client sockets share one port number, so the reply port in
	// pvans's searches is right for both families. An ephemeral IPv4 port
	// may be taken in IPv6: try another.
	for try := 0; ; try++ {
		port := s.client.LocalAddr().(*net.UDPAddr).AddrPort().Port()
		if s.client6, err = listenEphemeral6(port, o.ReceiveBuffer); err == nil {
			break
		}
		if !errors.Is(err, syscall.EADDRINUSE) || try == 16 {
			return err
		}
		s.client.Close()
		if s.client, err = listenEphemeral(o.ReceiveBuffer); err != nil {
			return err
		}
	}
	if o.SendBeacons {
		// Opened even without IPv6 destinations: a reload may add some.
		s.sendMu.Lock()
		s.beaconConn6, err = listenEphemeral6(0, 0)
		s.sendMu.Unlock()
	}
	return err
}

// joinGroups joins Options.Groups on the search port sockets.
func (s *Server) joinGroups() error {
	for _, g := range resolveDests(s.o.Groups, s.warnDest) {
		conn := s.main
		if !g.Addr.Addr().Is4() {
			if conn = s.main6; conn == nil {
				return fmt.Errorf("search group %s: %w", g.Destination, errNoIPv6)
			}
		}
		if err := joinGroup(conn, &g); err != nil {
			return fmt.Errorf("join search group %s: %w", g.Destination, err)
		}
	}
	return nil
}

// close6 closes the IPv6 sockets that are open.
func (s *Server) close6() error {
	var err error
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	for _, c := range []**net.UDPConn{&s.main6, &s.client6, &s.beaconConn6} {
		if *c != nil {
			err = errors.Join(err, (*c).Close())
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
	s.h.ownClient[0] = s.ClientAddr().Port()
	if s.client6 != nil {
		s.h6.ownClient[1] = s.client6.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	}
	s.wg.Add(2)
	go s.rxLoop(s.main, s.o.Batch, s.h.handle, &s.st.kernelDrops)
	go s.rxLoop(s.client, 4, s.ch.handleClient, &s.st.clientKernelDrops)
	if s.main6 != nil {
		s.wg.Add(2)
		go s.rxLoop(s.main6, s.o.Batch, s.h6.handle, &s.st.kernelDrops6)
		go s.rxLoop(s.client6, 4, s.ch6.handleClient, &s.st.clientKernelDrops6)
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
	s.sendMu.Lock()
	if s.beaconConn == nil {
		c, err := listenEphemeral(0)
		if err != nil {
			s.sendMu.Unlock()
			return err
		}
		s.beaconConn = c
	}
	if s.main6 != nil && s.beaconConn6 == nil {
		c, err := listenEphemeral6(0, 0)
		if err != nil {
			s.sendMu.Unlock()
			return err
		}
		s.beaconConn6 = c
	}
	s.sendMu.Unlock()
	b.resume()
	return nil
}

// rxLoop receives on conn until it is closed; kernelDrops is where that
// socket's SO_RXQ_OVFL count goes.
func (s *Server) rxLoop(conn *net.UDPConn, n int, handle func(*datagram), kernelDrops *atomic.Uint64) {
	defer s.wg.Done()
	rc, err := conn.SyscallConn()
	if err != nil {
		return
	}
	rb := newRxBatch(n, maxDatagram)
	var d datagram
	var drops uint32
	_ = rb.serve(rc, func(k int) {
		for i := 0; i < k; i++ {
			have := false
			ok := rb.fill(i, &d, &drops, &have)
			if have {
				kernelDrops.Store(uint64(drops))
			}
			if !ok {
				s.st.dropTruncated.Add(1)
				continue
			}
			handle(&d)
		}
		if kernelDrops == &s.st.kernelDrops { // the IPv4 search port
			s.flushReplies()
		}
	})
}

// LocalAddr is the search port socket's address (wildcard:port).
func (s *Server) LocalAddr() netip.AddrPort { return s.main.LocalAddr().(*net.UDPAddr).AddrPort() }

// ClientAddr is the client socket's address (wildcard:ephemeral).
func (s *Server) ClientAddr() netip.AddrPort {
	return s.client.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Stats returns the counters.
func (s *Server) Stats() Stats { return s.st.snapshot() }

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
	if s.client == nil {
		return errors.New("udpsearch: sockets not open")
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	var first error
	for i := range s.dests {
		d := &s.dests[i]
		pva.SetSearchUnicast(datagram, s.UnicastDestination(d.Addr.Addr()))
		err := sendTo(s.client, s.client6, datagram, d)
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

// BumpChangeCount records that pvans's own served set changed; the next
// beacons carry the new change count.
func (s *Server) BumpChangeCount() {
	if b := s.beacons.Load(); b != nil {
		b.bump()
	}
}

func (s *Server) sendBeacon(b []byte) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	for i := range s.beaconDests {
		if err := sendTo(s.beaconConn, s.beaconConn6, b, &s.beaconDests[i]); err != nil {
			s.st.sendErrors.Add(1)
			continue
		}
		s.st.beaconsSent.Add(1)
	}
}

var errNoIPv6 = errors.New("udpsearch: IPv6 destination but no IPv6 socket (Options.IPv6 off, or no IPv6 on this host)")

// sendTo sends b to d from conn, with d's TTL and interface when d is a
// multicast group.
func sendTo(conn, conn6 *net.UDPConn, b []byte, d *sendDest) error {
	if !d.Addr.Addr().Is4() {
		if conn6 == nil {
			return errNoIPv6
		}
		conn = conn6
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
	if s.main == nil {
		return nil // never listened
	}
	err := errors.Join(s.main.Close(), s.client.Close(), s.fwd.Close(), s.close6())
	s.sendMu.Lock()
	if s.beaconConn != nil {
		err = errors.Join(err, s.beaconConn.Close())
	}
	s.sendMu.Unlock()
	s.wg.Wait()
	return errors.Join(err, s.closeForward())
}
