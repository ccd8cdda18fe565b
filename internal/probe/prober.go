package probe

import (
	"context"
	"crypto/tls"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/limitlog"
	"github.com/pvans-project/pvans/internal/outbox"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
)

// Sink receives probe results; the daemon wires it to the registry. Calls
// are made one at a time, in order, outside the prober's lock.
type Sink interface {
	// Listed replaces the server's name set (names as the server sent
	// them: PVXS sorts and de-duplicates, pvAccessCPP need not).
	Listed(guid pva.GUID, ep netip.AddrPort, names []string, info Info)
	// Unlistable: the server could not be listed (refused, error status,
	// undecodable reply, or not reachable); its names are left to
	// search-through. It will be retried.
	Unlistable(guid pva.GUID, ep netip.AddrPort, err error)
	// Lost: the watch connection closed or went silent; drop the server's
	// names. It is reconnected with backoff until Forget.
	Lost(guid pva.GUID, ep netip.AddrPort, reason string)
}

// Reason says why a probe was requested (logged and counted).
type Reason uint8

// Probe reasons.
const (
	ReasonNew            Reason = iota // first sighting (beacon or discovery)
	ReasonChanged                      // new GUID or version at the endpoint
	ReasonSourcesChanged               // beacon change count moved
	ReasonStatic                       // configured static server
	ReasonManual                       // operator request
	ReasonSearchThrough                // a search-through reply named the server
)

// hint reports whether a probe request comes from a UDP datagram (a
// beacon, discovery or search-through reply), which anyone can forge or
// repeat: such requests are limited to one per backoff step per endpoint.
func (r Reason) hint() bool {
	return r == ReasonNew || r == ReasonChanged || r == ReasonSourcesChanged || r == ReasonSearchThrough
}

// The prober's own values for zero Options that are no setting of pvans.
// The settings (the pool, the timeouts, the schedule, the search-through
// bounds) are the daemon's to pass; a zero one means what its field says.
const (
	// DefaultPingWait is PingWait's: the ping goes out before the listing
	// on the same connection, so a server that answers it at all has
	// mostly answered by the time the listing returns.
	DefaultPingWait = 500 * time.Millisecond
	// reprobeJitter spreads periodic re-listings of servers probed together.
	reprobeJitter = 0.1
)

// DialFunc opens a client connection; tests replace it.
type DialFunc func(ctx context.Context, addr netip.AddrPort, opt pvaconn.Options, h pvaconn.Handler) (*pvaconn.Conn, error)

// Options configure a Prober. The daemon passes its settings through
// Apply before anything is probed; here a zero bound is no bound, a zero
// timeout none and a zero period off, as each field says.
type Options struct {
	Sink  Sink
	Clock clock.Clock // schedules: backoff, periodic re-listing
	// Concurrency bounds probes connecting or listing at once (watch
	// connections do not count); PerHostConcurrency is one server IP
	// address's share of them. 0 = no bound.
	Concurrency        int
	PerHostConcurrency int
	// EchoInterval is the ECHO period on watch connections; IdleTimeout
	// (0: DefaultIdleTimeout of EchoInterval) is how long a silent server
	// is tolerated. With neither, watch connections keep pvaconn's PVA
	// timers (a PVXS client's).
	EchoInterval time.Duration
	IdleTimeout  time.Duration
	// ProbeTimeout bounds one connect-and-list (wall clock); 0 = no bound
	// but the connection's own (Conn's handshake and message timeouts, the
	// idle timeout). FirstTimeout (at most ProbeTimeout) bounds the
	// first one of a server never listed; 0 = ProbeTimeout.
	ProbeTimeout time.Duration
	FirstTimeout time.Duration
	// Reprobe is the period of re-listing a listed server (±10 %); 0 or
	// negative: no periodic re-listing.
	Reprobe time.Duration
	// Backoff is the retry schedule after failures; a zero Min retries
	// nothing on a timer (see Backoff).
	Backoff Backoff
	// ThroughRetries is the retry budget, and MaxThrough the global bound,
	// of endpoints known only from search replies (ReasonSearchThrough):
	// anyone can name any endpoint in a UDP reply. 0 = no bound.
	ThroughRetries int
	MaxThrough     int
	// PingWait is how long a static server's GUID is awaited after its
	// listing before a synthetic one (StaticGUID) is used; 0 =
	// DefaultPingWait.
	PingWait time.Duration
	// Conn is the template for watch connections (Role, EchoInterval and
	// IdleTimeout are set from the fields above).
	Conn pvaconn.Options
	Dial DialFunc
	// PingPort, if set, is the UDP port discovery pings carry for servers
	// that answer them over UDP (pvAccessCPP); the owner of that socket
	// hands such answers to PingAnswer.
	PingPort func() uint16
	// TLS, when set, is the client configuration for servers' TLS
	// endpoints: a listing that learns one proves it (client.go, dialTLS)
	// and records its certificate's identity, and that TLS connection
	// becomes the server's watch, which the next listings use; a fresh
	// connection to a server known to have one is made there first, and
	// to the plain endpoint when that fails. nil: TLS endpoints are
	// learned, not proven, and everything runs over plain TCP.
	TLS *tls.Config
	// Rand drives the jitter; nil seeds one from the time. Tests pass a
	// seeded source to get a reproducible schedule.
	Rand   *rand.Rand
	Logger *zap.Logger
	// Observe, if set, receives every attempt's result ("ok", "failed":
	// connect or transport error, "refused": the server would not list)
	// and its duration, for metrics. Called like the Sink, outside locks.
	Observe func(result string, took time.Duration)
}

type server struct {
	ep   netip.AddrPort
	life life // set when made (Probe), then changed only by step, through apply
	cl   *client
	// failures counts attempts that did not list, in a row: the backoff
	// step, and a search-through endpoint's spent budget.
	failures int
	timer    clock.Timer
	timerGen uint64
	next     time.Time
	lastErr  string
	info     Info
	names    int
	listedAt time.Time
	// cancel ends the running attempt's context when the server is
	// forgotten: a probe dialling gives up then, so forgetting (an
	// eviction, a reload) leaves no connection attempt behind. It is made
	// per attempt, not per server: most rows a flood makes wait.
	cancel context.CancelFunc
	// Hint-triggered probes: at most one per backoff step (hintSteps
	// consecutive steps, the next allowed at hintOK); hintTimer, while
	// set, holds the one deferred to the end of the step.
	hintOK    time.Time
	hintSteps int
	hintTimer clock.Timer
	// wait is the probe queued for a slot of the pool, not yet granted.
	wait *waiter
	// news: the next probe answers a new GUID claimed at the endpoint (a
	// restart), so it queues with fresh probes even after failures: a
	// restarted server must not wait behind other hosts' silent retries.
	// A fact about the pool's queue, not the life: set with the claim, it
	// is spent when the next probe asks for a slot, while the claim stays
	// until that probe settles.
	news bool
}

// Prober runs probes. It is safe for concurrent use.
type Prober struct {
	opt    Options
	tm     atomic.Pointer[timings] // what Apply changes
	log    *zap.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	sched *sched // the probe pool
	full  *limitlog.Log

	mu         sync.Mutex
	servers    map[netip.AddrPort]*server
	through    int                // servers with through set
	pings      map[uint32]*client // discovery pings awaiting an answer, by sequence ID
	confirming int                // Confirm calls waiting or running
	rnd        *rand.Rand
	stats      counters // metrics.go
	closed     bool
	calls      outbox.Outbox[func()] // Sink and Observe calls, delivered in order outside mu
	// delivering counts deliver calls running callbacks (they nest: a
	// callback may call back into the prober); Close waits on idle until
	// none is, and none starts once closed is set: nothing is delivered
	// after Close returns (the owner may be gone).
	delivering int
	idle       sync.Cond

	// onSchedule, if set (tests), is called under the lock whenever a
	// timer is armed for a server.
	onSchedule func(ep netip.AddrPort, d time.Duration, failures int)
	// onClosed, if set (tests), is called when a connection has closed,
	// before connClosed takes the lock: a test holds it there to have an
	// attempt settle first.
	onClosed func(cl *client)
}

// DefaultIdleTimeout is the silence after which a watched server is lost:
// one echo interval, plus a grace of another interval capped at 10 s.
func DefaultIdleTimeout(echo time.Duration) time.Duration {
	return echo + min(echo, 10*time.Second)
}

// New returns a prober. It starts nothing until Probe or SetStatic.
func New(opt Options) *Prober {
	if opt.Clock == nil {
		opt.Clock = clock.Real{}
	}
	if opt.EchoInterval > 0 && opt.IdleTimeout <= 0 {
		opt.IdleTimeout = DefaultIdleTimeout(opt.EchoInterval)
	}
	if opt.PingWait <= 0 {
		opt.PingWait = DefaultPingWait
	}
	opt.Backoff = opt.Backoff.withDefaults()
	if opt.Dial == nil {
		opt.Dial = pvaconn.Dial
	}
	if opt.Rand == nil {
		opt.Rand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x70766e73))
	}
	if opt.Logger == nil {
		opt.Logger = zap.NewNop()
	}
	opt.Conn.Role = pvaconn.Client
	opt.Conn.EchoInterval = opt.EchoInterval
	opt.Conn.IdleTimeout = opt.IdleTimeout
	if opt.Conn.Logger == nil {
		opt.Conn.Logger = opt.Logger
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Prober{
		opt: opt, log: opt.Logger,
		ctx: ctx, cancel: cancel, servers: make(map[netip.AddrPort]*server), rnd: opt.Rand,
		pings: make(map[uint32]*client),
		sched: newSched(bound(opt.Concurrency), bound(opt.PerHostConcurrency)),
		full:  limitlog.New(opt.Logger, 0, opt.Clock),
	}
	p.idle.L = &p.mu
	p.tm.Store(&timings{probeTimeout: opt.ProbeTimeout, firstTimeout: opt.FirstTimeout, reprobe: opt.Reprobe,
		backoff: opt.Backoff, conn: opt.Conn, throughRetries: opt.ThroughRetries, maxThrough: opt.MaxThrough})
	return p
}

// Close stops every probe and closes every connection, without reports.
func (p *Prober) Close() {
	p.mu.Lock()
	p.closed = true
	for _, s := range p.servers {
		p.apply(s, event{kind: evForget})
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.mu.Lock() // reports being delivered (from connection goroutines too) finish
	for p.delivering > 0 {
		p.idle.Wait()
	}
	p.mu.Unlock()
}

// kick starts a probe goroutine for s, or marks it to run again. Called
// with p.mu held.
func (p *Prober) kick(s *server) {
	p.apply(s, event{kind: evStart})
}

// apply steps s's life on e and carries out the actions. It reports
// whether the running goroutine is to probe again. Called with p.mu held.
func (p *Prober) apply(s *server, e event) bool {
	was := s.life
	next, do := step(was, e)
	s.life = next
	if was.phase != phaseForgotten && was.origin == originThrough &&
		(next.origin != originThrough || next.phase == phaseForgotten) {
		p.through--
	}
	if do&actStopTimer != 0 {
		p.stopTimer(s)
	}
	if do&actClaimed != 0 {
		s.news = true
	}
	guid, ep := s.reportGUID(), s.ep
	switch {
	case do&actListed != 0:
		p.stats.Listed.Add(1)
		names, info := e.names, e.info
		p.report(func(k Sink) { k.Listed(guid, ep, names, info) })
	case do&actUnlistable != 0:
		p.stats.Unlistable.Add(1)
		err := e.err
		p.report(func(k Sink) { k.Unlistable(guid, ep, err) })
	case do&actLost != 0:
		s.names = 0
		p.stats.Lost.Add(1)
		reason := e.reason
		p.log.Debug("server lost", zap.Stringer("endpoint", ep), zap.Stringer("guid", guid), zap.String("reason", reason)) // the Sink logs it
		p.report(func(k Sink) { k.Lost(guid, ep, reason) })
	}
	switch {
	case do&actRelist != 0:
		if re := p.tm.Load().reprobe; re > 0 {
			p.schedule(s, jitter(re, reprobeJitter, p.rnd.Float64()))
		} else {
			p.stopTimer(s)
		}
	case do&actRetry != 0:
		p.retry(s)
	case do&actRetryFrom1 != 0:
		s.failures = 1
		p.retry(s)
	}
	if do&actForget != 0 {
		p.forgetLocked(s)
	}
	if do&actSpawn != 0 {
		p.enqueue(s)
	}
	return do&actLoop != 0
}

// report queues a Sink call; deliver runs them in order outside the lock.
func (p *Prober) report(f func(Sink)) {
	if sink := p.opt.Sink; sink != nil {
		p.calls.Push(func() { f(sink) })
	}
}

func (p *Prober) deliver() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.delivering++
	p.mu.Unlock()
	p.calls.Drain(&p.mu, func(f func()) { f() })
	p.mu.Lock()
	if p.delivering--; p.delivering == 0 {
		p.idle.Broadcast()
	}
	p.mu.Unlock()
}
