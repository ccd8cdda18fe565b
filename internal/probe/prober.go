package probe

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
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

// State is the operator's view of where the prober is with a server:
// the package doc's run and phase, folded (life.state).
type State uint8

// States.
const (
	StateIdle State = iota
	StateProbing
	StateListed     // listed, watching
	StateUnlistable // connected but listing failed, watching
	StateFailed     // not connected; retrying
)

var stateNames = [...]string{"idle", "probing", "listed", "unlistable", "failed"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "invalid"
}

// ServerStatus is the prober's view of one server, for operators.
type ServerStatus struct {
	Endpoint    netip.AddrPort
	GUID        pva.GUID
	Static      bool
	State       State
	Connected   bool
	Names       int
	ListedAt    time.Time
	Failures    int
	LastError   string
	NextAttempt time.Time // zero if none scheduled
	Info        Info
	TLS         bool // the watch connection is over TLS
}

// Stats are counters since New.
type Stats struct {
	Probes          uint64 // connect-and-list attempts (including re-listings)
	Listed          uint64
	Unlistable      uint64
	ConnectFailures uint64
	Lost            uint64
	// Verifications are hints of a new GUID at an endpoint whose server
	// is watched, checked over a fresh TCP connection: confirmed (the
	// endpoint answers with another GUID, or the old watch died and the
	// endpoint answers) or refuted (the old server still answers).
	VerifyConfirmed uint64
	VerifyRefuted   uint64
	// HintsDeferred are hint-triggered probe requests folded into the
	// next backoff step instead of probing at once (for a watched server
	// that would not list: into its next scheduled retry).
	HintsDeferred uint64
	// PingsOverUDP are discovery pings answered over UDP (pvAccessCPP),
	// each proving the GUID of the server pinged.
	PingsOverUDP uint64
	// ThroughForgotten are endpoints known only from search replies
	// forgotten after their retry budget; ThroughDropped, replies naming
	// a new such endpoint not taken because MaxThrough were known.
	ThroughForgotten uint64
	ThroughDropped   uint64
	// TLSFallbacks are fresh connections to a server's known TLS
	// endpoint that failed (refused, untrusted, another GUID there),
	// the server then being connected to over plain TCP.
	TLSFallbacks uint64
	// Waiting are probes (and confirmations) waiting for a slot of the
	// pool; Throttled counts those that waited although a slot was free,
	// because their host held its share or retries held theirs.
	Waiting   int
	Throttled uint64
	Servers   int
	Through   int // of Servers, known only from search replies
	Watching  int
	// WatchingTLS: of Watching, the watches over TLS.
	WatchingTLS int
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
	stats      Stats
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

// bound is a bound option's value: 0 or negative is no bound.
func bound(n int) int {
	if n <= 0 {
		return math.MaxInt
	}
	return n
}

// within is the shorter of two timeouts, 0 being none.
func within(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return max(b, 0)
	}
	return a
}

// withTimeout is context.WithTimeout, 0 or negative being none.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// timings are the options Apply replaces as one value, so an attempt
// sees the old ones or the new ones, never a mix.
type timings struct {
	probeTimeout, firstTimeout, reprobe time.Duration
	backoff                             Backoff
	conn                                pvaconn.Options // template for new connections
	throughRetries, maxThrough          int
}

// Timings are the options a running prober can change (a configuration
// reload); zero fields keep the current value. Each tag names the setting
// the field takes (config.Fill).
type Timings struct {
	Concurrency        int           `setting:"probe.concurrency"`
	PerHostConcurrency int           `setting:"probe.per_host_concurrency"`
	EchoInterval       time.Duration `setting:"probe.echo_interval"`
	IdleTimeout        time.Duration // 0 with a new EchoInterval: DefaultIdleTimeout of it
	ProbeTimeout       time.Duration `setting:"probe.timeout"`
	FirstTimeout       time.Duration `setting:"probe.first_timeout"`
	ThroughRetries     int           `setting:"probe.search_through_retries"`
	MaxThrough         int           `setting:"probe.search_through_max"`
	Reprobe            time.Duration `setting:"probe.reprobe_interval"`
	Backoff            Backoff
}

// Apply applies new timings from the next attempt on: its timeout and
// connection (echo, idle timeout) are the new ones, and so is the schedule
// it sets (re-listing, backoff); a shortened re-listing period also pulls
// in re-listings already scheduled later than it. Watch connections
// already open keep theirs. New concurrency bounds apply to the next
// probe to start; probes running beyond them finish.
func (p *Prober) Apply(t Timings) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.tm.Load()
	next := *cur
	if t.ProbeTimeout > 0 {
		next.probeTimeout = t.ProbeTimeout
	}
	if t.FirstTimeout > 0 {
		next.firstTimeout = t.FirstTimeout
	}
	if t.ThroughRetries > 0 {
		next.throughRetries = t.ThroughRetries
	}
	if t.MaxThrough > 0 {
		next.maxThrough = t.MaxThrough // endpoints above a lowered bound go by their budget
	}
	if t.Reprobe != 0 {
		next.reprobe = t.Reprobe
	}
	if t.Backoff.Min > 0 {
		next.backoff = t.Backoff.withDefaults()
	}
	if t.EchoInterval > 0 {
		next.conn.EchoInterval = t.EchoInterval
		next.conn.IdleTimeout = DefaultIdleTimeout(t.EchoInterval)
	}
	if t.IdleTimeout > 0 {
		next.conn.IdleTimeout = t.IdleTimeout
	}
	p.sched.setLimits(t.Concurrency, t.PerHostConcurrency)
	p.tm.Store(&next)
	if next.reprobe > 0 && next.reprobe < cur.reprobe {
		// A shorter re-listing period applies to re-listings already
		// scheduled, not only to the ones after them.
		now := p.opt.Clock.Now()
		for _, s := range p.servers {
			if s.timer != nil && s.failures == 0 && s.next.Sub(now) > next.reprobe {
				p.schedule(s, jitter(next.reprobe, reprobeJitter, p.rnd.Float64()))
			}
		}
	}
}

// StaticGUID is the identity reported for a server whose GUID is unknown
// (a static server that did not answer the TCP discovery ping, or a static
// name file): the first 12 bytes of SHA-256 of "pvans static " + endpoint,
// stable across daemon restarts.
func StaticGUID(ep netip.AddrPort) pva.GUID {
	sum := sha256.Sum256([]byte("pvans static " + ep.String()))
	return pva.GUID(sum[:12])
}

// Probe asks for a server to be listed (or re-listed). guid is what the
// request claims; the endpoint's own answer over TCP (the discovery ping
// on a fresh connection) decides. A GUID different from the one being
// watched is a restart claim: it is verified over a fresh connection while
// the old watch stays, and only a confirmed restart replaces the old
// server (reported as Listed under the new GUID; the registry's Listed
// drops the old one). Requests from hints (Reason.hint) cost at most one
// probe per backoff step per endpoint, however many datagrams arrive.
func (p *Prober) Probe(guid pva.GUID, ep netip.AddrPort, why Reason) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	s := p.servers[ep]
	if s == nil {
		through := why == ReasonSearchThrough
		if mt := p.tm.Load().maxThrough; through && mt > 0 && p.through >= mt {
			p.stats.ThroughDropped++
			p.mu.Unlock()
			p.full.Hit("through", "search-through endpoints at their bound (probe.search_through_max): new ones are not probed",
				zap.Int("bound", p.tm.Load().maxThrough))
			return
		}
		s = &server{ep: ep}
		if through {
			s.life.origin = originThrough
			p.through++
		}
		p.servers[ep] = s
	}
	p.apply(s, event{kind: why.event(), guid: guid})
	p.log.Debug("probe requested", zap.Stringer("endpoint", ep), zap.Stringer("guid", guid), zap.Uint8("reason", uint8(why)))
	switch {
	case why.hint() && why != ReasonSourcesChanged && s.life.phase == phaseRefused && s.watched() && s.life.id.claim.IsZero():
		// It would not list, its watch is up and nothing new is claimed:
		// the hint (a discovery reply, a search-through answer) waits for
		// the unlistable schedule, not one attempt per backoff step.
		p.stats.HintsDeferred++
	case why.hint():
		p.hintLocked(s)
	default:
		p.kick(s)
	}
	p.mu.Unlock()
	p.deliver()
}

// hintLocked probes s now if its hint step allows, or once at the end of
// the step, however many hints arrive meanwhile. A hint after a quiet step
// starts the steps over.
func (p *Prober) hintLocked(s *server) {
	if s.hintTimer != nil {
		p.stats.HintsDeferred++
		return
	}
	now := p.opt.Clock.Now()
	if now.Before(s.hintOK) {
		p.stats.HintsDeferred++
		s.hintTimer = p.opt.Clock.AfterFunc(s.hintOK.Sub(now), func() {
			p.mu.Lock()
			if s.hintTimer != nil && s.life.phase != phaseForgotten && !p.closed {
				s.hintTimer = nil
				p.hintKickLocked(s, p.opt.Clock.Now())
			}
			p.mu.Unlock()
		})
		return
	}
	if !s.hintOK.IsZero() && !now.Before(s.hintOK.Add(p.tm.Load().backoff.Delay(s.hintSteps, 0.5))) {
		s.hintSteps = 0
	}
	p.hintKickLocked(s, now)
}

func (p *Prober) hintKickLocked(s *server, now time.Time) {
	s.hintSteps++
	s.hintOK = now.Add(p.tm.Load().backoff.Delay(s.hintSteps, p.rnd.Float64()))
	p.kick(s)
}

// Forget stops probing and watching ep and closes its connection, without
// a report: the caller (beacon expiry, static list change) removes the
// server itself.
func (p *Prober) Forget(ep netip.AddrPort) {
	p.mu.Lock()
	if s := p.servers[ep]; s != nil {
		p.apply(s, event{kind: evForget})
	}
	p.mu.Unlock()
}

// forgetLocked ends s's goroutine, timers and watch (the forget action).
func (p *Prober) forgetLocked(s *server) {
	if s.cancel != nil {
		s.cancel()
	}
	if s.wait != nil && p.sched.cancel(s.wait) {
		p.wg.Done() // its goroutine never starts
	}
	s.wait = nil
	p.stopTimer(s)
	if s.hintTimer != nil {
		s.hintTimer.Stop()
	}
	if s.cl != nil {
		s.cl.conn.Close()
		s.cl = nil
	}
	delete(p.servers, s.ep)
}

// proven: see life.proven. p.mu held.
func (s *server) proven() bool {
	return s.life.proven(s.watched(), s.names)
}

// ForgetUnproven forgets ep's server only if nothing proved it over TCP
// (proven) and it is known under guid (or under no GUID yet). Checked under the prober's
// lock, so a listing that lands meanwhile is never forgotten. It reports
// whether ep is now unknown to the prober.
func (p *Prober) ForgetUnproven(ep netip.AddrPort, guid pva.GUID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.servers[ep]
	if s == nil {
		return true
	}
	if s.proven() || (!s.life.id.guid.IsZero() && s.life.id.guid != guid) {
		return false
	}
	p.apply(s, event{kind: evForget})
	return true
}

// Proven reports whether the prober holds ep as proven (static, listed,
// or shown over TCP and not lost since).
func (p *Prober) Proven(ep netip.AddrPort) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.servers[ep]
	return s != nil && s.proven()
}

// SetStatic replaces the list of static servers: endpoints probed (and
// watched, and reconnected) even if they never beacon. Endpoints no longer
// listed are forgotten unless a beacon also announced them.
func (p *Prober) SetStatic(eps []netip.AddrPort) {
	want := make(map[netip.AddrPort]bool, len(eps))
	for _, ep := range eps {
		want[ep] = true
	}
	p.mu.Lock()
	for ep, s := range p.servers {
		if s.life.origin == originStatic && !want[ep] {
			p.apply(s, event{kind: evDropStatic})
			if g := s.life.id.guid; g.IsZero() || g == StaticGUID(ep) {
				// Nothing else announced it: it goes, and its names with
				// it (a Lost is owed for a listing; forgetting alone would
				// close the watch that removes them).
				p.apply(s, event{kind: evDrop, reason: "taken off the static list"})
			}
		}
	}
	var add []netip.AddrPort
	for ep := range want {
		if s := p.servers[ep]; s == nil || s.life.origin != originStatic {
			add = append(add, ep)
		}
	}
	p.mu.Unlock()
	p.deliver()
	for _, ep := range add {
		p.Probe(pva.GUID{}, ep, ReasonStatic)
	}
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

// Servers returns the status of every server, in no particular order.
func (p *Prober) Servers() []ServerStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ServerStatus, 0, len(p.servers))
	for _, s := range p.servers {
		out = append(out, ServerStatus{Endpoint: s.ep, GUID: s.life.id.guid, Static: s.life.origin == originStatic, State: s.life.state(s.watched()),
			Connected: s.cl != nil, Names: s.names, ListedAt: s.listedAt, Failures: s.failures,
			LastError: s.lastErr, NextAttempt: s.next, Info: s.info, TLS: s.cl != nil && s.cl.overTLS})
	}
	return out
}

// Watching reports whether a watch connection to ep is up, and the GUID
// it watches.
func (p *Prober) Watching(ep netip.AddrPort) (pva.GUID, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.servers[ep]
	if s == nil || !s.watched() {
		return pva.GUID{}, false
	}
	return s.reportGUID(), true
}

// Refuses reports whether ep's server answered over TCP but would not
// list (unlistable): a row made for it after that report (a search-through
// confirmation that finished later) takes the state from here.
func (p *Prober) Refuses(ep netip.AddrPort) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.servers[ep]
	return s != nil && s.life.phase == phaseRefused
}

// Gone reports whether ep's server was reported lost and has not answered
// over TCP since (no listing; a beacon, which anyone can forge, does not
// count). A check
// that finished after the loss (a search-through confirmation) must not
// register names for it: nothing would remove them.
func (p *Prober) Gone(ep netip.AddrPort) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.servers[ep]
	return s != nil && s.life.unanswered()
}

// Stats returns the counters.
func (p *Prober) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	ss := p.sched.stats()
	st.Waiting, st.Throttled = ss.waiting, ss.throttled
	st.Servers, st.Through = len(p.servers), p.through
	for _, s := range p.servers {
		if s.cl != nil {
			st.Watching++
			if s.cl.overTLS {
				st.WatchingTLS++
			}
		}
	}
	return st
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
		p.stats.Listed++
		names, info := e.names, e.info
		p.report(func(k Sink) { k.Listed(guid, ep, names, info) })
	case do&actUnlistable != 0:
		p.stats.Unlistable++
		err := e.err
		p.report(func(k Sink) { k.Unlistable(guid, ep, err) })
	case do&actLost != 0:
		s.names = 0
		p.stats.Lost++
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

func (p *Prober) stopTimer(s *server) {
	s.timerGen++
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.next = time.Time{}
}

// schedule arms s's one timer: retry or re-list after d.
func (p *Prober) schedule(s *server, d time.Duration) {
	p.stopTimer(s)
	gen := s.timerGen
	s.next = p.opt.Clock.Now().Add(d)
	s.timer = p.opt.Clock.AfterFunc(d, func() {
		p.mu.Lock()
		if s.timerGen == gen && s.life.phase != phaseForgotten && !p.closed {
			s.timer = nil
			s.next = time.Time{}
			p.kick(s)
		}
		p.mu.Unlock()
	})
	if p.onSchedule != nil {
		p.onSchedule(s.ep, d, s.failures)
	}
}

// retry schedules the next attempt after a failure; without a backoff
// (a zero Min) there is none until the server is asked for again. A
// server that answered and would not list (refused) is retried on a
// schedule of its own (unlistableBackoff).
func (p *Prober) retry(s *server) {
	b := p.tm.Load().backoff
	if b.Min <= 0 {
		p.stopTimer(s)
		return
	}
	if s.life.phase == phaseRefused {
		b = unlistableBackoff(b)
	}
	p.schedule(s, b.Delay(s.failures, p.rnd.Float64()))
}

// The retry schedule of a server that answered over TCP and would not
// list: it doubles from UnlistableRetryMin (or probe.backoff_min, if
// longer) up to UnlistableRetryMax (or probe.backoff_max). Such a server
// is alive (its watch connection stays up and tells its loss) and its
// names come from search-through, so a listing gains little; and each
// attempt may be a warning in its log (Phoebus core-pva logs every
// CREATE_CHANNEL for its missing `server` PV): about 4 a day at the cap,
// where probe.backoff_max would make it 288.
const (
	UnlistableRetryMin = time.Minute
	UnlistableRetryMax = 6 * time.Hour
)

func unlistableBackoff(b Backoff) Backoff {
	b.Min = max(b.Min, UnlistableRetryMin)
	if b.Max > 0 {
		b.Max = max(b.Max, UnlistableRetryMax)
	}
	return b
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

// retryClass reports whether s's next probe queues as a retry (behind
// fresh probes): it failed last time and nothing new was claimed since.
// It consumes the news. Called with p.mu held.
func (s *server) retryClass() bool {
	retry := s.failures > 0 && !s.news
	s.news = false
	return retry
}

func (s *server) reportGUID() pva.GUID {
	if s.life.id.guid.IsZero() {
		return StaticGUID(s.ep)
	}
	return s.life.id.guid
}

// watched: a watch connection to s is up. p.mu held.
func (s *server) watched() bool {
	return s.cl != nil && !s.cl.dead.Load()
}

// connClosed is the watch: the connection of cl ended.
func (p *Prober) connClosed(cl *client, err error) {
	p.mu.Lock()
	s := cl.s
	if !cl.established || s.cl != cl || s.life.phase == phaseForgotten || p.closed {
		p.mu.Unlock()
		return
	}
	p.watchEnded(s, err)
	p.mu.Unlock()
	p.deliver()
}

// watchEnded is the watch-ends event of s's watch, which closed with err.
// Whoever first finds the watch dead under the lock calls it and clears
// s.cl, so the other finds nothing to do: connClosed, or an attempt
// settling on the dead watch. p.mu held.
func (p *Prober) watchEnded(s *server, err error) {
	s.cl = nil
	reason := closeReason(err)
	s.lastErr = reason
	p.apply(s, event{kind: evWatchEnds, ok: closedByServer(err), reason: reason})
}

// closedByServer reports whether a watch ended because the server closed
// or reset it (the process is gone), not by silence, which a network blip
// causes as well and which proves nothing.
func closedByServer(err error) bool {
	return err == nil || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func closeReason(err error) string {
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return "connection closed by server"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset by server"
	case errors.Is(err, pvaconn.ErrIdleTimeout):
		return "server stopped answering (no reply to echo)"
	}
	return err.Error()
}

type outcome struct {
	names      []string
	info       Info
	tcpGUID    pva.GUID // the endpoint's answer to the discovery ping on a fresh connection
	cl         *client  // the connection the listing ran on
	upgrade    *client  // a TLS connection to the server, proven by the listing: the watch to be
	verify     bool     // a restart claim checked on a connection of its own
	connErr    error    // no usable connection
	listErr    error    // connected, listing failed
	superseded bool     // forgotten or restarted while connecting
	closed     bool     // cl had closed when settle read it (settle sets it)
	took       time.Duration
}

// enqueue queues s's next probe in the pool (the spawn action): its
// goroutine starts when a slot is granted, so a waiting probe is a
// queue entry, not a goroutine. Called with p.mu held.
func (p *Prober) enqueue(s *server) {
	p.wg.Add(1) // the queued probe counts: Close waits for its goroutine, or for forget to take it out
	w := p.sched.enqueue(s.ep.Addr(), s.retryClass(), func(w *waiter) { go p.run(s, w) })
	s.wait = w // run clears it; it needs p.mu, held here
}

// run is one probe of s, granted a slot by w; it queues the next one at
// once when asked again meanwhile.
func (p *Prober) run(s *server, w *waiter) {
	defer p.wg.Done()
	p.mu.Lock()
	if s.wait == w {
		s.wait = nil
	}
	if s.life.phase == phaseForgotten || p.closed {
		// Forgotten while it was being granted.
		p.mu.Unlock()
		p.sched.release(w)
		return
	}
	ctx, cancel := context.WithCancel(p.ctx)
	s.cancel = cancel
	p.mu.Unlock()
	began := time.Now()
	o := p.attempt(ctx, s)
	o.took = time.Since(began)
	p.mu.Lock()
	s.cancel = nil
	p.mu.Unlock()
	cancel()
	p.sched.release(w)
	again := p.settle(s, o)
	p.deliver()
	if again {
		p.mu.Lock()
		if s.life.phase != phaseForgotten && !p.closed {
			p.enqueue(s)
		}
		p.mu.Unlock()
	}
}

// attempt connects (unless a watch connection is up) and lists s. On a
// fresh connection it also asks the endpoint for its GUID (discovery ping
// over TCP): that answer, not the hint that caused the probe, is who the
// server is. A restart claim against a live watch runs on a connection of
// its own, so the old watch stays until the claim is confirmed.
func (p *Prober) attempt(ctx context.Context, s *server) outcome {
	p.mu.Lock()
	p.stats.Probes++
	cl, guid, tlsEP := s.cl, s.life.id.guid, s.info.TLS
	verify := !s.life.id.claim.IsZero() && cl != nil
	if verify {
		cl = nil
	}
	first := s.listedAt.IsZero() && s.failures == 0
	p.mu.Unlock()

	tm := p.tm.Load()
	timeout := tm.probeTimeout
	if first {
		// A server never listed has not shown it deserves the full
		// timeout: one that holds the connection silent gives its slot
		// back soon, and its retry (behind fresh probes) gets the full one.
		timeout = within(timeout, tm.firstTimeout)
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	pinged := false
	if cl == nil {
		if !verify && p.opt.TLS != nil && tlsEP.IsValid() && !guid.IsZero() {
			// The server is known to serve TLS: list and watch it there,
			// within half the time, so plain TCP still has the rest.
			tctx, tcancel := withTimeout(ctx, timeout/2)
			tcl, _, err := p.dialTLS(tctx, s, tlsEP, guid)
			tcancel()
			if err == nil {
				cl = tcl
			} else {
				p.mu.Lock()
				p.stats.TLSFallbacks++
				p.mu.Unlock()
				p.log.Debug("TLS connection failed: connecting over plain TCP", zap.Stringer("endpoint", s.ep), zap.Stringer("tls", tlsEP), zap.Error(err))
			}
		}
		if cl == nil {
			cl = newClient(p, s)
			conn, err := p.opt.Dial(ctx, s.ep, tm.conn, cl)
			if err != nil {
				return outcome{connErr: err, verify: verify}
			}
			cl.mu.Lock()
			cl.conn = conn
			cl.mu.Unlock()
		}
		conn := cl.conn
		p.mu.Lock()
		if s.life.phase == phaseForgotten || p.closed || s.life.id.guid != guid {
			p.mu.Unlock()
			conn.Close()
			return outcome{superseded: true}
		}
		dead := cl.dead.Load()
		if !verify {
			cl.established = true
			s.cl = cl
			if dead {
				s.cl = nil
			}
		}
		p.mu.Unlock()
		if dead {
			return outcome{connErr: errConnLost, verify: verify, cl: cl}
		}
		var port uint16
		if p.opt.PingPort != nil {
			port = p.opt.PingPort()
		}
		cl.ping(p.pingSeq(cl), port)
		pinged = true
		defer p.pingDone(cl)
	}
	names, info, upgrade, err := cl.list(ctx)
	o := outcome{names: names, info: info, cl: cl, upgrade: upgrade, verify: verify}
	if err != nil {
		var le *ListError
		if errors.As(err, &le) {
			o.listErr = err
		} else {
			o.connErr = err
		}
	}
	if pinged {
		o.tcpGUID = cl.pingGUID(ctx, p.opt.PingWait)
		if o.tcpGUID.IsZero() && err == nil && len(names) > 0 {
			// The empty search went unanswered: a search for a name the
			// server just listed proves its GUID the same way, or forged
			// claims would name it after its connection drops.
			cl.searchName(names[0])
			o.tcpGUID = cl.pingGUID(ctx, p.opt.PingWait)
		}
	}
	return o
}

// pingSeq registers cl's ping under a fresh random sequence ID.
func (p *Prober) pingSeq(cl *client) uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		// From crypto/rand, not p.rnd: the sequence ID is what proves a
		// UDP answer saw the TCP ping, and p.rnd (seeded from the start
		// time, and showing in the jitter) can be predicted.
		var b [4]byte
		_, _ = crand.Read(b[:])
		seq := binary.LittleEndian.Uint32(b[:])
		if _, taken := p.pings[seq]; seq != 0 && seq != tlsSeq && !taken {
			p.pings[seq] = cl
			return seq
		}
	}
}

func (p *Prober) pingDone(cl *client) {
	p.mu.Lock()
	if seq := cl.seq.Load(); p.pings[seq] == cl {
		delete(p.pings, seq)
	}
	p.mu.Unlock()
}

// PingAnswer takes a discovery answer heard over UDP (no names) if it
// answers a ping of ours: its sequence ID, random and sent only over the
// TCP connection, matches, and it comes from the address pinged. It
// reports whether it was ours; the caller ignores it then.
func (p *Prober) PingAnswer(from netip.AddrPort, m *pva.SearchResponse) bool {
	p.mu.Lock()
	cl := p.pings[m.Seq]
	if cl == nil || from.Addr().Unmap() != cl.s.ep.Addr().Unmap() {
		p.mu.Unlock()
		return false
	}
	delete(p.pings, m.Seq)
	p.stats.PingsOverUDP++
	p.mu.Unlock()
	cl.answeredOverUDP(m.GUID)
	return true
}

// settle records an attempt's outcome, reports it and schedules what comes
// next, as the events of the server's life. It reports whether the
// goroutine should probe again at once.
func (p *Prober) settle(s *server, o outcome) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o.upgrade != nil {
		defer func() {
			if !o.upgrade.established {
				o.upgrade.conn.Close()
			}
		}()
	}
	if s.life.phase == phaseForgotten || p.closed {
		if o.verify && o.cl != nil && o.cl.conn != nil {
			o.cl.conn.Close()
		}
		return false
	}
	if s.cl != nil && s.cl.dead.Load() {
		// The watch closed and its connClosed waits for the lock: the
		// watch's end comes first, as if connClosed had had the lock
		// first. Dropping it as one more failure of this attempt would
		// leave connClosed nothing to report, and the names registered.
		p.watchEnded(s, s.cl.closeErr)
	}
	// o.cl's close is read once: when it closes after this reading, its
	// connClosed waits for the lock and finds the watch this settle
	// leaves, so the close is never lost between two readings.
	o.closed = o.cl != nil && o.cl.dead.Load()
	if o.connErr == nil && o.listErr == nil && o.cl != nil && (o.closed || !o.verify && s.cl != o.cl) {
		// The connection closed between the listing and now: nothing
		// watches the names, so they are not reported (a static server
		// would otherwise keep them for ever).
		o.connErr = errConnLost
	}
	if o.verify && !o.superseded && !p.settleClaim(s, &o) {
		return p.finish(s)
	}
	if !o.verify && !o.superseded && o.cl != nil {
		// The endpoint's own answer on a fresh connection names the server.
		p.apply(s, event{kind: evConnected, guid: o.tcpGUID, ok: o.connErr == nil})
	}
	if errors.Is(o.connErr, syscall.ECONNREFUSED) {
		p.apply(s, event{kind: evConnRefused})
	}
	guid, ep := s.reportGUID(), s.ep
	if !o.superseded {
		p.observe(o)
	}
	switch {
	case o.superseded:
	case o.connErr != nil:
		s.failures++
		s.lastErr = o.connErr.Error()
		p.stats.ConnectFailures++
		p.apply(s, event{kind: evFails, err: o.connErr})
		p.log.Debug("probe failed", zap.Stringer("endpoint", ep), zap.Int("failures", s.failures), zap.Error(o.connErr))
	case o.listErr != nil:
		s.failures++
		s.lastErr = o.listErr.Error()
		s.info = o.info
		s.names = 0
		p.apply(s, event{kind: evRefuses, err: o.listErr})
		p.log.Info("server unlistable", zap.Stringer("endpoint", ep), zap.Stringer("guid", guid), zap.Error(o.listErr))
	default:
		s.failures = 0
		s.lastErr = ""
		s.info = o.info
		s.names = len(o.names)
		s.listedAt = p.opt.Clock.Now()
		if up := o.upgrade; up != nil && s.cl == o.cl && !up.dead.Load() {
			// The watch moves to the proven TLS connection; the plain
			// one's close is no loss: it is no longer the watch.
			up.established = true
			s.cl = up
			o.cl.conn.Close()
			p.log.Debug("server watched over TLS", zap.Stringer("endpoint", s.ep), zap.Stringer("tls", o.info.TLS))
		}
		info := o.info
		info.Took = o.took
		p.apply(s, event{kind: evLists, names: o.names, info: info})
		p.log.Debug("server listed", zap.Stringer("endpoint", ep), zap.Stringer("guid", guid), zap.Int("names", len(o.names)))
	}
	if budget := p.tm.Load().throughRetries; s.life.origin == originThrough && budget > 0 && s.failures >= budget {
		p.stats.ThroughForgotten++
		p.log.Debug("search-through endpoint forgotten after its retry budget", zap.Stringer("endpoint", ep), zap.Int("failures", s.failures))
		p.apply(s, event{kind: evDrop, reason: "forgotten: known only from search replies, and failed its retry budget"})
		return false
	}
	return p.finish(s)
}

// observe queues o's result for Options.Observe, in order with the
// reports. Called with p.mu held.
func (p *Prober) observe(o outcome) {
	obs := p.opt.Observe
	if obs == nil {
		return
	}
	result := "ok"
	switch {
	case o.connErr != nil:
		result = "failed"
	case o.listErr != nil:
		result = "refused"
	}
	took := o.took
	p.calls.Push(func() { obs(result, took) })
}

// settleClaim decides a restart claim from its verification attempt (o,
// on a connection of its own, see ident.verdict). A confirmed claim makes
// the new connection the watch and lets settle report the outcome under
// the new GUID; it returns false when there is nothing to report (a
// refuted claim). Called with p.mu held.
func (p *Prober) settleClaim(s *server, o *outcome) bool {
	claim, old := s.life.id.claim, s.life.id.guid
	proven := s.life.id.verdict(o.tcpGUID, o.connErr == nil)
	if proven.IsZero() {
		p.stats.VerifyRefuted++
		if o.cl != nil && o.cl.conn != nil {
			o.cl.conn.Close()
		}
		p.log.Info("restart claim refuted over TCP: the watched server still answers at its endpoint",
			zap.Stringer("endpoint", s.ep), zap.Stringer("guid", old), zap.Stringer("claimed_guid", claim),
			zap.Stringer("answered_guid", o.tcpGUID))
		p.apply(s, event{kind: evRefuted})
		return false
	}
	p.stats.VerifyConfirmed++
	p.log.Debug("restart confirmed over TCP", zap.Stringer("endpoint", s.ep), zap.Stringer("old_guid", old), zap.Stringer("guid", proven))
	if s.cl != nil {
		oldcl := s.cl
		s.cl = nil // its close is not a loss to report: Listed replaces it
		oldcl.conn.Close()
	}
	if o.connErr != nil || o.listErr != nil {
		// The new instance cannot be listed: the old one's names go.
		p.apply(s, event{kind: evRestarted, reason: "server restarted (new GUID confirmed over TCP)"})
	}
	p.apply(s, event{kind: evConfirmed, guid: proven})
	s.failures = 0
	if o.cl != nil && !o.closed {
		o.cl.established = true
		s.cl = o.cl
	}
	return true
}

// finish ends a settle: probe again at once if asked meanwhile. Called
// with p.mu held.
func (p *Prober) finish(s *server) bool {
	return p.apply(s, event{kind: evSettled})
}
