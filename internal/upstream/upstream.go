// Package upstream keeps pvans's connections to upstream TCP name servers
// (EPICS_PVA_NAME_SERVERS), so pvans can chain to another name server the
// way a PVXS client does (docs/protocol.md, "Name servers in PVXS
// clients"): one persistent connection per server, rebuilt by a 10 s check
// when it is down, searches appended only while it is validated, replies
// handed to the search-through ring. It does not build searches or decide
// what to search (internal/searchring does).
package upstream

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
)

// CheckInterval is PVXS's tcpNSCheckInterval: how often a down name-server
// connection is rebuilt.
const CheckInterval = 10 * time.Second

// Options configures the pool.
type Options struct {
	Servers []netip.AddrPort
	// Conn is the template for each connection (Role is set to Client).
	Conn pvaconn.Options
	// OnReply receives every CMD_SEARCH_RESPONSE of a name server (from =
	// its endpoint); m is valid only during the call. A name server may
	// speak for any endpoint.
	OnReply func(from netip.AddrPort, m *pva.SearchResponse)
	// OnAskReply receives every CMD_SEARCH_RESPONSE of a server asked
	// directly (Ask; from = its endpoint), which speaks only for itself;
	// m is valid only during the call.
	OnAskReply func(from netip.AddrPort, m *pva.SearchResponse)
	// OnReady is called each time a connection is (re)validated: the
	// caller pokes its search ring, as PVXS does.
	OnReady func(server netip.AddrPort)
	Clock   clock.Clock
	Logger  *zap.Logger
	// Dial is pvaconn.Dial unless a test replaces it.
	Dial func(ctx context.Context, addr netip.AddrPort, opt pvaconn.Options, h pvaconn.Handler) (*pvaconn.Conn, error)
}

// Settings are what a running pool can change (a configuration reload):
// the name servers and the template of their connections (Role is set to
// Client).
type Settings struct {
	Servers []netip.AddrPort
	Conn    pvaconn.Options
}

// Pool is the set of upstream connections.
type Pool struct {
	o      Options
	ctx    context.Context
	cancel context.CancelFunc
	ups    atomic.Pointer[[]*Conn]         // replaced whole by Apply
	conn   atomic.Pointer[pvaconn.Options] // template for new connections
	timer  clock.Timer
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	asks   asks
}

// Conn is one upstream name server; it implements searchring.Upstream.
type Conn struct {
	p       *Pool
	addr    netip.AddrPort
	gone    atomic.Bool // removed by Apply: do not reconnect
	cur     atomic.Pointer[pvaconn.Conn]
	dialing atomic.Bool
	ready   atomic.Bool
	// Connects counts successful validations.
	Connects atomic.Uint64
	reply    pva.SearchResponse
	replyMu  sync.Mutex
}

// New builds the pool; Start connects. A pool without servers stays idle.
func New(o Options) *Pool {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Dial == nil {
		o.Dial = pvaconn.Dial
	}
	o.Conn.Role = pvaconn.Client
	p := &Pool{o: o}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	ups := make([]*Conn, 0, len(o.Servers))
	for _, a := range o.Servers {
		ups = append(ups, &Conn{p: p, addr: a})
	}
	p.ups.Store(&ups)
	conn := o.Conn
	p.conn.Store(&conn)
	return p
}

// Apply changes the name servers and the connection template.
// Connections to servers still listed are kept; a removed server's
// connection is closed; a new server is connected at once (once Start has
// run).
func (p *Pool) Apply(s Settings) {
	servers, conn := s.Servers, s.Conn
	conn.Role = pvaconn.Client
	p.conn.Store(&conn)
	p.mu.Lock()
	old := *p.ups.Load()
	keep := make(map[netip.AddrPort]*Conn, len(old))
	for _, u := range old {
		keep[u.addr] = u
	}
	ups := make([]*Conn, 0, len(servers))
	for _, a := range servers {
		if u, ok := keep[a]; ok {
			ups = append(ups, u)
			delete(keep, a)
			continue
		}
		ups = append(ups, &Conn{p: p, addr: a})
	}
	p.ups.Store(&ups)
	started := p.timer != nil
	p.mu.Unlock()
	for _, u := range keep {
		u.gone.Store(true)
		if c := u.cur.Load(); c != nil {
			_ = c.Close()
		}
	}
	if started {
		p.check()
	}
}

// Start connects to every server at once, then rebuilds lost connections
// every CheckInterval.
func (p *Pool) Start() { p.check() }

// Conns lists the upstream connections, ready or not.
func (p *Pool) Conns() []*Conn { return *p.ups.Load() }

// check rebuilds every connection that is down, then re-arms itself.
func (p *Pool) check() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	for _, u := range *p.ups.Load() {
		if u.cur.Load() == nil && u.dialing.CompareAndSwap(false, true) {
			p.wg.Add(1)
			go u.dial()
		}
	}
	p.timer = p.o.Clock.AfterFunc(CheckInterval, p.check)
}

func (u *Conn) dial() {
	defer u.p.wg.Done()
	defer u.dialing.Store(false)
	c, err := u.p.o.Dial(u.p.ctx, u.addr, *u.p.conn.Load(), u)
	if err != nil {
		u.p.o.Logger.Debug("upstream name server unreachable", zap.Stringer("endpoint", u.addr), zap.Error(err))
		return
	}
	if u.gone.Load() { // removed while dialing
		_ = c.Close()
		return
	}
	u.cur.Store(c)
	u.ready.Store(true)
	u.Connects.Add(1)
	u.p.o.Logger.Info("upstream name server connected", zap.Stringer("endpoint", u.addr))
	if u.p.o.OnReady != nil {
		u.p.o.OnReady(u.addr)
	}
	u.p.wg.Add(1)
	go func() {
		defer u.p.wg.Done()
		<-c.Done()
		u.ready.Store(false)
		u.cur.CompareAndSwap(c, nil)
		u.p.o.Logger.Info("upstream name server disconnected", zap.Stringer("endpoint", u.addr), zap.Error(c.Err()))
	}()
}

// Message handles what the name server sends: search responses go to the
// ring; everything else (echo replies) only keeps the link alive.
func (u *Conn) Message(c *pvaconn.Conn, h pva.Header, payload []byte) {
	if h.Command != pva.CmdSearchResponse || u.p.o.OnReply == nil {
		return
	}
	u.replyMu.Lock()
	defer u.replyMu.Unlock()
	if err := u.reply.Decode(payload, h.BigEndian()); err != nil {
		// A malformed response is a protocol fault, as in PVXS.
		u.p.o.Logger.Warn("malformed search response from upstream name server", zap.Stringer("endpoint", u.addr), zap.Error(err))
		_ = c.Close()
		return
	}
	u.p.o.OnReply(c.Remote(), &u.reply)
}

// Addr is the name server's endpoint.
func (u *Conn) Addr() netip.AddrPort { return u.addr }

// Ready reports a validated connection.
func (u *Conn) Ready() bool { return u.ready.Load() && u.cur.Load() != nil }

// Backlog is the bytes queued on the connection.
func (u *Conn) Backlog() int {
	if c := u.cur.Load(); c != nil {
		return c.Backlog()
	}
	return 0
}

// Send queues one search message.
func (u *Conn) Send(msg []byte) {
	if c := u.cur.Load(); c != nil {
		_ = c.Send(msg)
	}
}

// Close stops reconnecting and closes every connection.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	p.cancel()
	for _, u := range p.Conns() {
		if c := u.cur.Load(); c != nil {
			_ = c.Close()
		}
	}
	p.wg.Wait()
}
