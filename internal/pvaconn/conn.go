// Package pvaconn is one framed PVAccess TCP connection, in either role:
// the greeting and validation handshake, the read loop (header checks,
// segment reassembly, size limits, idle/handshake/message deadlines), ECHO,
// and a bounded send queue drained by a single writer.
//
// It owns framing and connection life only. It does not know what a search,
// a channel or an RPC is: every application message other than the
// handshake and ECHO is handed to a Handler. tcpsearch (server role) and the
// probe (client role) build on it.
//
// API:
//
//	Serve(nc, opt, h) *Conn                 server role on an accepted socket
//	Dial(ctx, addr, opt, h) (*Conn, error)  client role; returns once validated
//	(*Conn).Send(msg) error                 enqueue one whole message (copied); never blocks
//	(*Conn).Flags() uint8                   header flags for messages we send
//	(*Conn).Backlog() int                   bytes queued and not yet written
//	(*Conn).Validated() <-chan struct{}     closed once the handshake completed
//	(*Conn).Close(), Done(), Err()          life
//	(*Conn).Remote(), Local()               endpoints
//	Counters                                limit hits, shared across connections
//
// Server role (docs/protocol.md, "The TCP handshake"): on start it sends
// SET_BYTE_ORDER and CONNECTION_VALIDATION{0x10000, 0x7FFF,
// ["anonymous","ca"]} in one write, answers the client's
// CONNECTION_VALIDATION (any method) with CONNECTION_VALIDATED OK, answers
// ECHO with the same payload, and sets the direction bit 0x40 on everything
// it sends. Messages with 0x40 set are a protocol fault.
//
// Client role: latches its transmit byte order from the server's
// SET_BYTE_ORDER (pvAccessCPP reads one connection-wide order), answers the
// server's validation choosing "ca" if offered else "anonymous" (as PVXS),
// waits for CONNECTION_VALIDATED, and sends ECHO every EchoInterval so the
// peer's 40 s idle timeout never fires. Messages without 0x40 are a fault.
//
// Every received application message is decoded in its own byte order
// (flags bit 7). The payload passed to Handler.Message is a view into a
// reused read buffer, valid only during the call.
package pvaconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
)

// Role says which side of the connection we are.
type Role int

const (
	Server Role = iota // we accepted the socket; we send the greeting
	Client             // we connected; we answer the greeting
)

func (r Role) String() string {
	if r == Server {
		return "server"
	}
	return "client"
}

// A PVA peer's timers for a zero IdleTimeout or EchoInterval: PVXS's with
// EPICS_PVA_CONN_TMO unset (30 s), which the simulated servers and the
// name-server client keep, as PVXS peers do (docs/protocol.md,
// "Constants"). The daemon passes its own from config.
const (
	DefaultIdleTimeout  = 40 * time.Second // tcpTimeout = 4/3 × EPICS_PVA_CONN_TMO(30)
	DefaultEchoInterval = 15 * time.Second // clamp(tcpTimeout×3/8, 1 s, 15 s)
)

// readBufSize is the read buffer a connection keeps; a larger message grows
// it for that message only, so idle connections stay small.
const readBufSize = 16 << 10

// MaxPreHandshake is the largest message a client may send before the
// handshake completes (server role). Until then the only messages a client
// has reason to send are CONNECTION_VALIDATION (a few hundred bytes with
// "ca" auth) and ECHO, so an unvalidated peer never holds more than the
// connection's read buffer, whatever its headers announce.
const MaxPreHandshake = readBufSize

// keepWriteBuf is the largest send buffer kept for reuse after a burst.
const keepWriteBuf = 64 << 10

// Options configure a connection. A zero IdleTimeout or EchoInterval takes
// the PVA timers above; a zero bound below is no bound (the daemon passes
// every one from a config connection profile).
type Options struct {
	Role Role
	// Local is the source address Dial connects from; zero: the kernel's
	// choice.
	Local netip.Addr
	// IdleTimeout closes the connection when no bytes were received for
	// this long (read deadline); it also bounds each write.
	IdleTimeout time.Duration
	// EchoInterval is the client role's ECHO period.
	EchoInterval time.Duration
	// KeepAlive, in the server role, sends an empty ECHO this often
	// (0: never). A Phoebus client closes a connection that carries no
	// channel, its name-server connection, after EPICS_PVA_CONN_TMO/2
	// (15 s) with nothing received (ClientTCPHandler.checkResponsiveness),
	// and so can be told nothing until it searches again; PVXS and
	// pvAccessCPP clients ignore an ECHO from the server.
	KeepAlive time.Duration
	// MaxMessage is the largest accepted payload (after reassembly);
	// a larger header closes the connection before anything is allocated.
	MaxMessage int
	// SendQueueBytes bounds the bytes queued and in flight; a Send that
	// would exceed it closes the connection (a peer that does not read).
	// Above half of it the read loop pauses until the writer drains, so a
	// peer that pipelines requests faster than it reads replies is slowed
	// through TCP rather than cut off; a peer that never reads then ends
	// at the write deadline (IdleTimeout).
	SendQueueBytes int
	// HandshakeTimeout bounds the time from start to validation.
	HandshakeTimeout time.Duration
	// MessageTimeout bounds the time a started message (or segment
	// sequence) may take to complete, from its first byte to its last
	// segment: slow-loris peers trickling bytes. Control messages and
	// middle segments do not restart it.
	MessageTimeout time.Duration
	// BigEndian is the byte order we send in (server role; the client role
	// starts with it and then follows the server's SET_BYTE_ORDER).
	BigEndian bool
	// AuthUser and AuthHost fill the "ca" auth payload (client role).
	AuthUser, AuthHost string
	// Counters receives limit hits; share one across a listener's
	// connections. Nil gives the connection its own.
	Counters *Counters
	// Budget bounds the bytes all of a listener's connections buffer
	// together (see Budget); nil: no global bound.
	Budget *Budget
	Logger *zap.Logger
	// Clock drives the client ECHO timer (tests use clock.Fake). Deadlines
	// use the wall clock: the kernel enforces them.
	Clock clock.Clock
	// TLS makes Dial speak Secure PVAccess: the TLS handshake (within
	// ctx and HandshakeTimeout) before the PVA one. Nil: plain TCP.
	TLS *tls.Config
}

func (o Options) withDefaults() Options {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.EchoInterval <= 0 {
		o.EchoInterval = DefaultEchoInterval
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = math.MaxInt
	}
	if o.SendQueueBytes <= 0 {
		o.SendQueueBytes = math.MaxInt
	}
	if o.AuthUser == "" {
		o.AuthUser = "pvans"
	}
	if o.AuthHost == "" {
		o.AuthHost, _ = os.Hostname()
	}
	if o.Counters == nil {
		o.Counters = new(Counters)
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return o
}

// Handler receives the application messages the connection does not
// handle itself (everything but validation and ECHO requests: a client's
// handler gets the ECHO replies; unknown commands included — ignore them).
// payload is valid only during the call; segments are already reassembled
// (h.Size is the total, segment bits cleared).
// Message runs on the connection's read goroutine: while it runs nothing
// else is read from this peer.
type Handler interface {
	Message(c *Conn, h pva.Header, payload []byte)
}

// Closer is optionally implemented by a Handler: Closed is called once,
// after both connection goroutines have exited, with the reason.
type Closer interface {
	Closed(c *Conn, err error)
}

// Errors a connection ends with (Err).
var (
	ErrClosed           = errors.New("pvaconn: closed locally")
	ErrSendQueueFull    = errors.New("pvaconn: send queue full (peer not reading)")
	ErrMessageTooLarge  = errors.New("pvaconn: message exceeds size limit")
	ErrDirection        = errors.New("pvaconn: message with wrong direction bit")
	ErrSegmentation     = errors.New("pvaconn: segmentation violation")
	ErrIdleTimeout      = errors.New("pvaconn: idle timeout")
	ErrHandshakeTimeout = errors.New("pvaconn: handshake timeout")
	ErrMessageTimeout   = errors.New("pvaconn: message completion timeout")
)

// Conn is one PVA TCP connection. Its methods are safe for concurrent use.
type Conn struct {
	nc     net.Conn
	opt    Options
	h      Handler
	cnt    *Counters
	log    *zap.Logger
	remote netip.AddrPort
	local  netip.AddrPort
	start  time.Time

	sendBE    atomic.Bool
	validated chan struct{} // closed once the handshake completed
	valOnce   sync.Once

	mu       sync.Mutex
	pending  []byte
	queued   int // pending + in flight, under mu
	closed   bool
	err      error
	echo     clock.Timer
	backlog  atomic.Int64
	wake     chan struct{}
	drained  chan struct{} // a write completed (wakes a paused reader)
	closing  chan struct{}
	wdone    chan struct{}
	done     chan struct{}
	spareOut []byte
}

// Serve runs the server role on an accepted socket and returns at once.
func Serve(nc net.Conn, opt Options, h Handler) *Conn {
	opt.Role = Server
	c := newConn(nc, opt, h)
	c.sendBE.Store(c.opt.BigEndian)
	f := c.Flags()
	b := pva.AppendSetByteOrder(nil, f)
	b = pva.AppendServerValidation(b, f, &pva.ServerValidation{
		BufferSize: pva.DefaultBufferSize, RegistrySize: pva.DefaultRegistrySize,
		AuthMethods: []string{"anonymous", "ca"},
	})
	c.Send(b)
	if opt.KeepAlive > 0 {
		c.armEcho(opt.KeepAlive)
	}
	c.run()
	return c
}

// NameServerKeepAlive is the name server's KeepAlive: within Phoebus's
// 15 s, with room for a loaded machine.
const NameServerKeepAlive = 10 * time.Second

// Dial connects to a PVA server in the client role and returns once the
// server sent CONNECTION_VALIDATED, or with an error (connection closed,
// handshake timeout, ctx done).
func Dial(ctx context.Context, addr netip.AddrPort, opt Options, h Handler) (*Conn, error) {
	opt.Role = Client
	var d net.Dialer
	if opt.Local.IsValid() {
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(opt.Local, 0))
	}
	nc, err := d.DialContext(ctx, "tcp", addr.String())
	if err != nil {
		return nil, err
	}
	if opt.TLS != nil {
		hctx := ctx
		if t := opt.HandshakeTimeout; t > 0 {
			var cancel context.CancelFunc
			hctx, cancel = context.WithTimeout(ctx, t)
			defer cancel()
		}
		tc := tls.Client(nc, opt.TLS)
		if err := tc.HandshakeContext(hctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		nc = tc
	}
	c := newConn(nc, opt, h)
	c.sendBE.Store(c.opt.BigEndian)
	c.armEcho(c.opt.EchoInterval)
	c.run()
	select {
	case <-c.validated:
		return c, nil
	case <-c.done:
		return nil, c.Err()
	case <-ctx.Done():
		c.Close()
		<-c.done
		return nil, ctx.Err()
	}
}

func newConn(nc net.Conn, opt Options, h Handler) *Conn {
	opt = opt.withDefaults()
	c := &Conn{
		nc: nc, opt: opt, h: h, cnt: opt.Counters, log: opt.Logger,
		start:     time.Now(),
		validated: make(chan struct{}),
		wake:      make(chan struct{}, 1),
		drained:   make(chan struct{}, 1),
		closing:   make(chan struct{}),
		wdone:     make(chan struct{}),
		done:      make(chan struct{}),
	}
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		c.remote = a.AddrPort()
	}
	if a, ok := nc.LocalAddr().(*net.TCPAddr); ok {
		c.local = a.AddrPort()
	}
	return c
}

func (c *Conn) run() {
	go c.writeLoop()
	go c.readLoop()
}

// Flags returns the header flags for messages we send: the direction bit
// in the server role, and our current byte order.
func (c *Conn) Flags() uint8 {
	var f uint8
	if c.opt.Role == Server {
		f = pva.FlagServer
	}
	if c.sendBE.Load() {
		f |= pva.FlagBigEndian
	}
	return f
}

// PeerCertificates is the certificate chain the peer presented on a TLS
// connection (verified by the TLS configuration's rules), nil on a plain
// one.
func (c *Conn) PeerCertificates() []*x509.Certificate {
	if tc, ok := c.nc.(*tls.Conn); ok {
		return tc.ConnectionState().PeerCertificates
	}
	return nil
}

// Remote is the peer's address (zero for non-TCP sockets).
func (c *Conn) Remote() netip.AddrPort { return c.remote }

// Local is our address (zero for non-TCP sockets).
func (c *Conn) Local() netip.AddrPort { return c.local }

// Done is closed when the connection has ended and both its goroutines
// (and Closer.Closed) have returned.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Validated is closed once the handshake completed.
func (c *Conn) Validated() <-chan struct{} { return c.validated }

// Err is why the connection ended (nil while open; io.EOF for a peer
// close, ErrClosed after Close).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Backlog is the number of bytes queued and not yet written. PVXS skips a
// name server whose backlog exceeds 64 KiB; search-through does the same.
func (c *Conn) Backlog() int { return int(c.backlog.Load()) }

// Close ends the connection. It does not wait: use Done.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	return nil
}

// Send enqueues one or more whole messages (copied). It never blocks. If
// the queue would exceed SendQueueBytes the connection is closed and
// ErrSendQueueFull returned: a peer that does not read must not make the
// daemon grow.
func (c *Conn) Send(msg []byte) error {
	c.mu.Lock()
	if c.closed {
		err := c.err
		c.mu.Unlock()
		return err
	}
	if c.queued+len(msg) > c.opt.SendQueueBytes {
		c.mu.Unlock()
		c.cnt.SendQueueFull.Add(1)
		c.fail(ErrSendQueueFull)
		return ErrSendQueueFull
	}
	if !c.opt.Budget.take(overFree(c.queued+len(msg)) - overFree(c.queued)) {
		c.mu.Unlock()
		c.cnt.BudgetExceeded.Add(1)
		c.fail(ErrBudget)
		return ErrBudget
	}
	c.enqueueLocked(msg)
	return nil
}

// Offer enqueues msg as Send does when it fits in half the send queue and
// the budget, and otherwise reports false and leaves the connection as it
// is: for messages the peer did not ask for on this connection (answers
// to its UDP searches), which have another way to go, so the half the
// peer's own requests may use stays free for them.
func (c *Conn) Offer(msg []byte) bool {
	c.mu.Lock()
	if c.closed || c.queued+len(msg) > c.opt.SendQueueBytes/2 ||
		!c.opt.Budget.take(overFree(c.queued+len(msg))-overFree(c.queued)) {
		c.mu.Unlock()
		return false
	}
	c.enqueueLocked(msg)
	return true
}

// enqueueLocked appends msg to the queue, wakes the writer and unlocks
// c.mu.
func (c *Conn) enqueueLocked(msg []byte) {
	c.pending = append(c.pending, msg...)
	c.queued += len(msg)
	c.backlog.Store(int64(c.queued))
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// fail records the first cause and tears the socket down; the goroutines
// notice and exit.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.err = err
	if c.echo != nil {
		c.echo.Stop()
	}
	c.mu.Unlock()
	close(c.closing)
	c.nc.Close()
	if err != ErrClosed && err != io.EOF {
		c.log.Debug("pva connection closed", zap.Stringer("role", c.opt.Role),
			zap.Stringer("peer", c.remote), zap.Error(err))
	}
}

func (c *Conn) writeLoop() {
	defer close(c.wdone)
	for {
		select {
		case <-c.wake:
		case <-c.closing:
			return
		}
		c.mu.Lock()
		out := c.pending
		c.pending = c.spareOut[:0]
		c.spareOut = nil
		c.mu.Unlock()
		if len(out) == 0 {
			continue
		}
		c.nc.SetWriteDeadline(time.Now().Add(c.opt.IdleTimeout))
		_, err := c.nc.Write(out)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				c.cnt.WriteTimeouts.Add(1)
			}
			c.fail(err)
			return
		}
		c.mu.Lock()
		c.opt.Budget.give(overFree(c.queued) - overFree(c.queued-len(out)))
		c.queued -= len(out)
		c.backlog.Store(int64(c.queued))
		if cap(out) <= keepWriteBuf {
			c.spareOut = out[:0]
		}
		c.mu.Unlock()
		select {
		case c.drained <- struct{}{}:
		default:
		}
	}
}

func (c *Conn) armEcho(every time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.echo = c.opt.Clock.AfterFunc(every, func() {
		var b [pva.HeaderSize]byte
		if c.Send(pva.AppendEcho(b[:0], c.Flags(), nil)) == nil {
			c.armEcho(every)
		}
	})
}

// deadline kinds, to count which limit a read timeout hit.
const (
	dlIdle = iota
	dlHandshake
	dlMessage
)

type reader struct {
	charged      int64 // bytes of buf and seg charged to the Budget
	buf          []byte
	r, w         int       // unread bytes are buf[r:w]
	partialSince time.Time // when an incomplete message started (zero: none)
	seg          []byte    // reassembled segments so far
	segHdr       pva.Header
	segActive    bool
	isValidated  bool
	cv           pva.ClientValidation
	sv           pva.ServerValidation
}

func (c *Conn) readLoop() {
	rd := &reader{buf: make([]byte, readBufSize)}
	err := c.readMessages(rd)
	c.fail(err)
	<-c.wdone
	// Give the budget back: the buffers, and what was queued and never
	// written (Send refuses once closed, so queued no longer changes).
	c.opt.Budget.give(rd.charged)
	c.mu.Lock()
	c.opt.Budget.give(overFree(c.queued))
	c.queued = 0
	c.mu.Unlock()
	if cl, ok := c.h.(Closer); ok {
		cl.Closed(c, c.Err())
	}
	close(c.done)
}

func (c *Conn) readMessages(rd *reader) error {
	for {
		completed, err := c.parse(rd)
		if err != nil {
			return err
		}
		select {
		case <-c.closing:
			return ErrClosed
		default:
		}
		if rd.r == rd.w {
			rd.r, rd.w = 0, 0
			if len(rd.buf) > readBufSize {
				rd.buf = make([]byte, readBufSize) // drop a buffer grown for one big message
				c.account(rd)
			}
		} else if rd.r > 0 {
			rd.w = copy(rd.buf, rd.buf[rd.r:rd.w])
			rd.r = 0
		}
		now := time.Now()
		if rd.w > rd.r || rd.segActive {
			if rd.partialSince.IsZero() || completed {
				rd.partialSince = now
			}
		} else {
			rd.partialSince = time.Time{}
		}
		dl, kind := now.Add(c.opt.IdleTimeout), dlIdle
		if !rd.isValidated && c.opt.HandshakeTimeout > 0 {
			if t := c.start.Add(c.opt.HandshakeTimeout); t.Before(dl) {
				dl, kind = t, dlHandshake
			}
		}
		if !rd.partialSince.IsZero() && c.opt.MessageTimeout > 0 {
			if t := rd.partialSince.Add(c.opt.MessageTimeout); t.Before(dl) {
				dl, kind = t, dlMessage
			}
		}
		c.nc.SetReadDeadline(dl)
		n, err := c.nc.Read(rd.buf[rd.w:])
		rd.w += n
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				switch kind {
				case dlHandshake:
					c.cnt.HandshakeTimeouts.Add(1)
					return ErrHandshakeTimeout
				case dlMessage:
					c.cnt.MessageTimeouts.Add(1)
					return ErrMessageTimeout
				}
				c.cnt.IdleTimeouts.Add(1)
				return ErrIdleTimeout
			}
			if n > 0 {
				c.parse(rd) // deliver what arrived with the EOF
			}
			return err
		}
	}
}

// parse handles every complete message in buf[r:w]. It grows the buffer
// when the next message cannot fit, and reports whether any message
// completed (which restarts the message timeout).
func (c *Conn) parse(rd *reader) (completed bool, err error) {
	for rd.w-rd.r >= pva.HeaderSize {
		b := rd.buf[rd.r:rd.w]
		h, err := pva.DecodeHeader(b)
		if err != nil {
			c.cnt.ProtocolErrors.Add(1)
			return completed, err
		}
		if h.FromServer() != (c.opt.Role == Client) {
			c.cnt.ProtocolErrors.Add(1)
			return completed, ErrDirection
		}
		if h.Control() {
			// A control message completes nothing: it must not restart the
			// timer of a message whose segments are still arriving.
			rd.r += pva.HeaderSize
			if h.Command == pva.CtrlSetByteOrder && c.opt.Role == Client {
				c.sendBE.Store(h.BigEndian())
			}
			continue
		}
		limit := c.opt.MaxMessage
		if !rd.isValidated && c.opt.Role == Server {
			limit = min(limit, MaxPreHandshake)
		}
		if uint64(h.Size) > uint64(limit) {
			c.cnt.Oversize.Add(1)
			return completed, ErrMessageTooLarge
		}
		total := pva.HeaderSize + int(h.Size)
		if len(b) < total {
			rd.grow(total)
			return completed, c.account(rd)
		}
		if err := c.throttle(); err != nil {
			return completed, err
		}
		rd.r += total
		// Only a whole message (or the last of its segments) completes: the
		// message timer runs from a message's first byte to its last segment.
		if s := h.Segment(); s == 0 || s == pva.FlagSegLast {
			completed = true
		}
		if err := c.message(rd, h, b[pva.HeaderSize:total:total]); err != nil {
			return completed, err
		}
	}
	return completed, nil
}

// grow makes room for a message of total bytes whose start is buf[r:w]:
// never from the header's claim alone, but as bytes arrive. Only once the
// bytes received fill the buffer does it grow, to at most growFactor times
// them (to total directly when that is within reach, so a legitimate
// large message costs one allocation, not a chain of doublings): a peer
// makes pvans hold at most growFactor times what it actually sent, and
// what it holds beyond the base buffer is charged to the listener's
// Budget.
func (rd *reader) grow(total int) {
	if total <= len(rd.buf) || rd.w < len(rd.buf) && rd.r == 0 {
		return
	}
	if rd.r > 0 { // move the partial message to the front first
		rd.w = copy(rd.buf, rd.buf[rd.r:rd.w])
		rd.r = 0
		if rd.w < len(rd.buf) {
			return
		}
	}
	nb := make([]byte, min(total, growFactor*len(rd.buf)))
	rd.w = copy(nb, rd.buf[:rd.w])
	rd.buf = nb
}

// growFactor bounds one growth of the read buffer relative to the bytes
// already received (which fill it): with the 16 KiB base buffer, any
// message up to 128 KiB (tcpsearch.DefaultMaxMessageBytes) is one allocation.
const growFactor = 8

// throttle is backpressure: above half the queue bound the read loop waits
// for the writer, so a client pipelining faster than it reads is slowed
// through TCP instead of being cut off. One that does not read at all ends
// at the write deadline.
func (c *Conn) throttle() error {
	if c.Backlog() <= c.opt.SendQueueBytes/2 {
		return nil
	}
	c.cnt.ReadPauses.Add(1)
	for c.Backlog() > c.opt.SendQueueBytes/2 {
		select {
		case <-c.drained:
		case <-c.closing:
			return ErrClosed
		}
	}
	return nil
}

// message applies the segmentation rules
// (docs/protocol.md, "Segmentation"), then handles the handshake and ECHO,
// and passes everything else to the Handler.
func (c *Conn) message(rd *reader, h pva.Header, payload []byte) error {
	switch h.Segment() {
	case 0:
		if rd.segActive {
			c.cnt.ProtocolErrors.Add(1)
			return ErrSegmentation
		}
	case pva.FlagSegFirst:
		if rd.segActive {
			c.cnt.ProtocolErrors.Add(1)
			return ErrSegmentation
		}
		rd.segActive, rd.segHdr = true, h
		rd.seg = append(rd.seg[:0], payload...)
		return c.account(rd)
	default: // middle or last
		if !rd.segActive || h.Command != rd.segHdr.Command {
			c.cnt.ProtocolErrors.Add(1)
			return ErrSegmentation
		}
		if len(rd.seg)+len(payload) > c.opt.MaxMessage {
			c.cnt.Oversize.Add(1)
			return ErrMessageTooLarge
		}
		rd.seg = append(rd.seg, payload...)
		if err := c.account(rd); err != nil {
			return err
		}
		if h.Segment() == pva.FlagSegMiddle {
			return nil
		}
		h = rd.segHdr
		h.Flags &^= pva.FlagSegMask
		h.Size = uint32(len(rd.seg))
		payload = rd.seg
		rd.segActive = false
		defer func() {
			if cap(rd.seg) > readBufSize {
				rd.seg = nil
				c.account(rd)
			}
		}()
	}
	switch {
	case h.Command == pva.CmdEcho:
		if c.opt.Role == Server {
			return c.Send(pva.AppendEcho(nil, c.Flags(), payload))
		}
		// A client's idle timer was reset by the bytes themselves; its
		// handler sees the reply too (the probe orders a request against
		// the echo sent after it).
		c.h.Message(c, h, payload)
		return nil
	case h.Command == pva.CmdConnectionValidation && c.opt.Role == Server:
		if err := rd.cv.Decode(payload, h.BigEndian()); err != nil {
			c.cnt.ProtocolErrors.Add(1)
			return err
		}
		// Any method is accepted: auth is never refused (PVXS), and
		// pvAccessCPP without a session sends an empty method.
		var b [pva.HeaderSize + 1]byte
		if err := c.Send(pva.AppendConnectionValidated(b[:0], c.Flags(), pva.Status{})); err != nil {
			return err
		}
		c.setValidated(rd)
		return nil
	case h.Command == pva.CmdConnectionValidation && c.opt.Role == Client:
		if err := rd.sv.Decode(payload, h.BigEndian()); err != nil {
			c.cnt.ProtocolErrors.Add(1)
			return err
		}
		return c.Send(c.clientValidation(&rd.sv))
	case h.Command == pva.CmdConnectionValidated && c.opt.Role == Client:
		if _, err := pva.DecodeConnectionValidated(payload, h.BigEndian()); err != nil {
			c.cnt.ProtocolErrors.Add(1)
			return err
		}
		// Any decodable status means ready (PVXS proceeds even on ERROR).
		c.setValidated(rd)
		return nil
	}
	c.h.Message(c, h, payload)
	return nil
}

func (c *Conn) setValidated(rd *reader) {
	rd.isValidated = true
	c.valOnce.Do(func() { close(c.validated) })
}

// clientValidation picks "ca" if offered, else "anonymous", as PVXS does.
func (c *Conn) clientValidation(sv *pva.ServerValidation) []byte {
	method := "anonymous"
	for _, m := range sv.AuthMethods {
		if m == "ca" {
			method = "ca"
		}
	}
	f := c.Flags()
	cv := pva.ClientValidation{BufferSize: pva.DefaultBufferSize, RegistrySize: pva.DefaultRegistrySize, AuthMethod: method}
	if method == "ca" {
		cv.AuthPayload = pva.CAAuthPayload(f&pva.FlagBigEndian != 0, c.opt.AuthUser, c.opt.AuthHost)
	}
	return pva.AppendClientValidation(nil, f, &cv)
}
