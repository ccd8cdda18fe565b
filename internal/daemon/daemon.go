// Package daemon assembles pvans from its parts: it builds each one from
// the Config, connects the flows between them (beacons → tracker → prober
// → registry → resolver → TCP and UDP answers; unresolved names → search
// ring → registry), and owns start-up order, readiness, the snapshot and
// shutdown. It holds no protocol logic of its own; cmd/pvans handles
// flags, signals and systemd.
package daemon

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/buildinfo"
	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/dnswatch"
	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/insight"
	"github.com/pvans-project/pvans/internal/keychain"
	"github.com/pvans-project/pvans/internal/limitlog"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/relay"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/searchring"
	"github.com/pvans-project/pvans/internal/serverpv"
	"github.com/pvans-project/pvans/internal/tcpsearch"
	"github.com/pvans-project/pvans/internal/twin"
	"github.com/pvans-project/pvans/internal/udpsearch"
	"github.com/pvans-project/pvans/internal/upstream"
)

// DiscoverySettle is how long after a discovery ping the daemon waits for
// replies before calling itself ready (pvAccessCPP answers after a random
// 50-150 ms; a loaded host is slower).
const DiscoverySettle = 2 * time.Second

// Daemon is one running pvans.
type Daemon struct {
	// boot is the configuration the daemon started with: the settings a
	// reload cannot apply (config.NeedsRestart) are read from it. cur is
	// the one in force, replaced whole by Reload.
	boot      *config.Config
	cur       atomic.Pointer[config.Config]
	log       *zap.Logger
	logBudget *limitlog.Budget // d.log's lines per message (pvans_log_lines_suppressed_total)
	clk       clock.Clock
	guid      pva.GUID
	startedAt time.Time

	Registry *registry.Registry
	Resolver *resolver.Resolver
	// Keys is the Secure PVAccess keychain (pva.tls_keychain); nil
	// without one.
	Keys     *keychain.Holder
	Tracker  *beacon.Tracker
	Prober   *probe.Prober
	pingPort atomic.Uint32 // the client socket's port, once bound: where pvAccessCPP answers probe pings
	Ring     *searchring.Ring
	UDP      *udpsearch.Server
	TCP      *tcpsearch.Server
	// Twins pairs a client's UDP search socket with its TCP name-server
	// connection, so that its UDP searches are answered over TCP.
	Twins    *twin.Table
	ServerPV *serverpv.Provider // the `server` PV on the TCP port
	Upstream *upstream.Pool
	Events   *events.Log
	Down     *events.Down // servers lost and not back, for the operator's views
	Insight  *insight.Insight
	Metrics  *metrics.Metrics
	// DNS follows the host names in the address lists (dns.*); Relay
	// sends accepted sightings on to relay.to.
	DNS   *dnswatch.Watcher
	Relay *relay.Relay
	// lists are static.servers and pva.name_servers as DNS answers them
	// now, expanded once per reload or DNS change (refreshLists) for the
	// paths that read them often: every lost watch, every scrape.
	lists atomic.Pointer[followedLists]

	nameFiles *probe.NameFiles
	httpSrv   *httpapi.Service
	httpLn    net.Listener            // nil when the HTTP endpoint is off
	addrList  []udpsearch.Destination // search destinations: configured plus automatic; mu
	relayPing []netip.AddrPort        // trusted relays discovery pings also go to; mu

	// replicas are the addresses of the other pvans instances registered
	// (refreshReplicas): their UDP searches are their own search-through.
	replicas atomic.Pointer[map[netip.Addr]struct{}]

	bounds      Bounds          // constants; a test's own through Options.TestBounds
	counters                    // metrics.go
	discoveries discoveryRounds // by trigger, into counters
	relayOpen   atomic.Bool

	ready        atomic.Bool
	readyWhy     atomic.Value // string
	snapTimer    clock.Timer
	discoverTmr  clock.Timer
	periodicTmr  clock.Timer // discovery.interval
	mu           sync.Mutex  // owns addrList, the timers, started and closed
	reloadMu     sync.Mutex  // one Reload (or DNS change) at a time
	started      bool        // Start got as far as arming the timers
	closed       bool
	shutdownOnce sync.Once
}

// Options are what cmd/pvans decides besides the Config.
type Options struct {
	Logger *zap.Logger
	Clock  clock.Clock
	// Resolver looks up the host names in the address lists again
	// (dns.refresh); nil: the system resolver.
	Resolver dnswatch.Resolver
	// ProbeDial replaces the prober's dialling (tests: servers that never
	// answer); nil: pvaconn.Dial.
	ProbeDial probe.DialFunc
	// TestBounds changes, for a test, bounds production takes from
	// constants (testbounds.go); nil in production.
	TestBounds func(*Bounds)
}

// New builds every part and wires every callback between them, but opens
// no socket: Start does that, so nothing arrives before every part that
// could handle it exists. Parts a configuration does not use (the
// upstream pool without name servers, the search ring without search
// through, the static name files without a directory) exist and idle.
func New(cfg *config.Config, o Options) (*Daemon, error) {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	// Every part logs through one line budget: hosts on the network cause
	// most lines (limitlog.Budget), and must not flood the journal.
	log, logBudget := limitlog.Logger(o.Logger, 0, 0, o.Clock)
	d := &Daemon{boot: cfg, log: log, logBudget: logBudget, clk: o.Clock, startedAt: o.Clock.Now(), Events: events.New(500), Down: events.NewDown()}
	d.discoveries = newDiscoveryRounds(&d.counters)
	d.bounds = productionBounds()
	if o.TestBounds != nil {
		o.TestBounds(&d.bounds)
	}
	d.cur.Store(cfg)
	if _, err := rand.Read(d.guid[:]); err != nil {
		return nil, fmt.Errorf("daemon GUID: %w", err)
	}
	d.guid = pva.PvansGUID(d.guid) // other replicas tell us by it

	d.readyWhy.Store("starting")
	// The settings a reload can change reach the parts through apply
	// (appliers.go) at the end of New, as they do on every reload.
	d.Registry = registry.New(registry.Options{Clock: d.clk, Logger: d.log.Named("registry")})
	d.Resolver = resolver.New(d.Registry, resolver.Options{Clock: d.clk, Logger: d.log.Named("resolver"),
		// d.UDP is built below; nothing is pushed before Start.
		PushUDP: func(to netip.AddrPort, g resolver.Group) { d.UDP.PushAnswer(to, g) }})
	// The settings a part takes when it is built reach it through its
	// options' tags (config.FillAtStart).
	insightOpt := insight.Options{
		Known:                func(n string) bool { return d.Registry.Lookup([]byte(n)) != nil },
		Clock:                d.clk,
		Clients:              insight.DefaultClients,
		QueueBytes:           insight.DefaultQueueBytes,
		DigestNamesPerSecond: insight.DefaultDigestNamesPerSecond,
		GUIDChangesPerHour:   insight.DefaultGUIDChangesPerHour,
	}
	config.FillAtStart(&insightOpt, cfg)
	d.Insight = insight.New(insightOpt)
	d.Tracker = beacon.New(beacon.Options{Clock: d.clk, OnEvent: d.onBeaconEvent, Proven: d.beaconProven, Logger: d.log.Named("beacon")})
	d.Metrics = metrics.New(buildinfo.Get())
	d.Relay = relay.New(relay.Options{Clock: d.clk, Logger: d.log.Named("relay"),
		Broadcast: func(a netip.Addr) bool { return d.UDP != nil && d.UDP.Broadcast(a) }})
	d.DNS = dnswatch.New(dnswatch.Options{Resolver: o.Resolver, Clock: d.clk, Logger: d.log.Named("dns"), Changed: d.onDNSChanged})
	tlsOpt, err := d.tlsListener(cfg)
	if err != nil {
		return nil, err
	}
	var probeTLS *tls.Config
	if d.Keys != nil {
		probeTLS = d.Keys.ClientConfig() // listings prove TLS endpoints
	}
	d.Prober = probe.New(probe.Options{
		Sink:    probeSink{d},
		Clock:   d.clk,
		Conn:    connOptions(cfg.Probe.Conn),
		TLS:     probeTLS,
		Logger:  d.log.Named("probe"),
		Observe: probe.MetricsObserver(d.Metrics),
		Dial:    o.ProbeDial,
		// pvAccessCPP answers the TCP discovery ping over UDP, to the port
		// it carries: the client socket, which hands it back (OnPingAnswer).
		PingPort: func() uint16 { return uint16(d.pingPort.Load()) },
	})
	d.nameFiles = &probe.NameFiles{Sink: serverAccessSink{probeSink{d}}, Clock: d.clk, Logger: d.log.Named("static")}

	pvLim := serverpv.Limits{Logger: d.log.Named("serverpv"), TypesPerConn: serverpv.DefaultTypesPerConn,
		TypeBytesPerConn: serverpv.DefaultTypeBytesPerConn, TypeBytesTotal: serverpv.DefaultTypeBytesTotal}
	d.ServerPV = serverpv.New("pvans "+buildinfo.Get(), pvLim)
	d.Twins = twin.New(d.clk, twin.Options{Fingerprints: twin.DefaultFingerprints})
	d.TCP = tcpsearch.New(tcpsearch.Options{
		Listen:    d.tcpListen(),
		TLSListen: tlsOpt.TLSListen,
		TLS:       tlsOpt.TLS,
		GUID:      d.guid,
		Channels:  d.ServerPV,
		Logger:    d.log.Named("tcp"),
		Clock:     d.clk,
		Insight:   d.Insight,
		Twins:     d.Twins,
	}, tcpsearch.FromResolver(d.Resolver))

	var ifaces []netip.Addr
	for _, a := range cfg.PVA.Interfaces {
		if !a.IsUnspecified() {
			ifaces = append(ifaces, a)
		}
	}
	addrList, beaconList := d.destinations(cfg)
	d.addrList = addrList
	d.relayPing = d.relayPings(cfg)
	// The port, the TCP port (the bound one, if 0 was asked, is set in
	// Start), the receive buffer, own beacons, the beacon queue (the receive
	// path never waits for the registry) and reply pacing come from the
	// options' tags.
	udpOpt := udpsearch.Options{
		Interfaces:       ifaces,
		GUID:             d.guid,
		IPv6:             udpIPv6(cfg.PVA.Interfaces),
		Groups:           endpoints(cfg.PVA.SearchGroups),
		AddrList:         addrList,
		BeaconAddrList:   beaconList,
		Resolver:         udpResolver{d.Resolver, d},
		Beacons:          beaconFilter{d},
		OnSearchResponse: d.onUDPSearchResponse,
		OnPingAnswer:     d.Prober.PingAnswer,
		OnDiscoveryPing:  d.Relay.Pinged,
		Insight:          d.Insight,
		Twins:            d.Twins,
		Clock:            d.clk,
		Logger:           d.log.Named("udp"),
		BeaconQueue:      udpsearch.DefaultBeaconQueue,
		ReplyBurst:       udpsearch.DefaultReplyBurst,
		ReplyQueueBytes:  udpsearch.DefaultReplyQueueBytes,
	}
	config.FillAtStart(&udpOpt, cfg)
	d.UDP = udpsearch.New(udpOpt)

	ring, err := searchring.New(searchring.Options{
		Clock:       d.clk,
		Transport:   ringTransport{d},
		IgnoreGUIDs: []pva.GUID{d.guid},
		Resolved:    func(name string, g pva.GUID, ep netip.AddrPort) { d.onSearchResolved(name, false, g, ep) },
		ResolvedTLS: d.onSearchResolvedTLS,
		Duplicate:   d.onSearchDuplicate,
		Logger:      d.log.Named("searchring"),
		// Its bounds are constants since no setting names them (issue 40).
		MaxChannels:        searchring.DefaultMaxChannels,
		DatagramsPerSecond: searchring.DefaultDatagramsPerSecond,
	})
	if err != nil {
		return nil, fmt.Errorf("search ring: %w", err)
	}
	d.Ring = ring
	d.Upstream = upstream.New(upstream.Options{
		OnReply:    func(from netip.AddrPort, m *pva.SearchResponse) { d.Ring.OnReply(from, searchring.ViaNameServer, m) },
		OnAskReply: d.onAskReply,
		OnReady:    func(netip.AddrPort) { d.Ring.Poke(searchring.PokeNameServer) },
		Clock:      d.clk,
		Logger:     d.log.Named("upstream"),
	})
	httpOpt := httpapi.Options{
		Registry: regView{d.Registry, d.Tracker},
		Events:   d.Events,
		Down:     d.Down,
		Insight:  d.Insight,
		Metrics:  d.Metrics.Handler(),
		Ready:    d.Ready,
		Discover: d.operatorDiscover,
		Version:  buildinfo.Get(),
		// The Host check (DNS rebinding) answers the names this host
		// is known by; others come from http.allowed_hosts.
		HostNames: ownHostNames(cfg.HTTP.Listen),
		Started:   d.startedAt,
		Told:      d.told,
		// Connection limits, timeouts, bounded bodies and patterns,
		// discovery rate limit; the web configuration file from the tag.
		Limits: d.httpLimits(cfg),
		Logger: d.log.Named("http"),
		Clock:  d.clk,
	}
	config.FillAtStart(&httpOpt, cfg)
	d.httpSrv = httpapi.New(httpOpt)
	// pvans's own beacons tell peers what it answers moved.
	d.Registry.SubscribeChanges(d.UDP.BumpChangeCount)
	// The restart fan-out's UDP re-answers go out through the search port
	// (resolver, told.go).
	d.Resolver.SetUDPSink(d.UDP.Reanswer)
	d.apply(nil, cfg, nil)
	d.registerMetrics()
	return d, nil
}

// GUID is the daemon's own server identity (discovery answers, beacons).
func (d *Daemon) GUID() pva.GUID { return d.guid }

// Start loads the snapshot, opens every socket, then starts every part
// receiving. On error everything already started is stopped again.
func (d *Daemon) Start() (err error) {
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	cfg := d.conf()
	snapLoaded := d.loadSnapshot()
	d.dropDeniedServers(&cfg.Access, "snapshot server outside access.server_allow: dropped")
	d.refreshReplicas()

	// Sockets. The TCP name server first: its port is what discovery
	// answers and beacons carry. The relay profile has none.
	if !d.boot.Relay.Only {
		if err := d.TCP.Listen(); err != nil {
			return fmt.Errorf("TCP name-server listener on %v: %w", d.tcpListen(), err)
		}
	}
	if as := d.TCP.Addrs(); len(as) > 0 {
		d.UDP.SetTCPPort(as[0].Port())
	}
	d.openRelay(cfg)
	if err := d.UDP.Listen(); err != nil {
		return fmt.Errorf("UDP search port %d: %w", d.boot.PVA.BroadcastPort, err)
	}
	d.Ring.SetReplyPort(d.UDP.ClientAddr().Port())
	d.pingPort.Store(uint32(d.UDP.ClientAddr().Port()))
	if err := d.listenHTTP(); err != nil {
		return err
	}

	// Receiving.
	d.Insight.Start()
	if !d.boot.Relay.Only {
		d.TCP.Serve()
	}
	d.UDP.Start()
	d.Upstream.Start()
	d.Tracker.Start()
	d.Prober.SetStatic(d.allowedStatic(d.staticServers(cfg)))
	d.nameFiles.Start()
	d.serveHTTP()
	d.armSnapshot()

	d.mu.Lock()
	addrList := d.addrList
	pinged := len(addrList) > 0 || len(d.relayPing) > 0
	d.started = true
	d.mu.Unlock()
	d.armDiscovery()
	if cfg.DNS.Refresh > 0 {
		d.DNS.Start() // the first round at once: every address of every name
	}
	switch {
	case d.boot.Search.DiscoveryAtStart && pinged:
		if derr := d.discover(discoverStart); derr != nil {
			d.log.Warn("discovery ping failed", zap.Error(derr))
		}
		d.readyWhy.Store("waiting for replies to the first discovery round")
		d.discoverTmr = d.clk.AfterFunc(DiscoverySettle, func() { d.setReady("discovery round done") })
		if snapLoaded {
			d.setReady("snapshot loaded")
		}
	default:
		d.setReady("sockets bound")
	}
	d.log.Info("pvans started",
		zap.String("guid", d.guid.String()),
		zap.Stringers("tcp", d.TCP.Addrs()),
		zap.Stringer("udp", d.UDP.LocalAddr()),
		zap.Stringers("search_destinations", addrList),
		zap.Stringers("name_servers", d.nameServers(cfg)),
		zap.Stringers("relay_to", cfg.Relay.To),
		zap.Bool("search_through", cfg.Search.Through),
		zap.String("http", d.HTTPAddr()))
	return nil
}

// tcpListen is where the name server listens: each interface address, the
// wildcards 0.0.0.0 and :: as one dual-stack [::] socket (Go's "tcp" on a
// wildcard address, as PVXS binds [::] on Linux).
func (d *Daemon) tcpListen() []netip.AddrPort { return d.listenOn(d.boot.PVA.ServerPort) }

// listenOn is every TCP listen address for port: each interface, 0.0.0.0
// once.
func (d *Daemon) listenOn(port uint16) []netip.AddrPort {
	var listen []netip.AddrPort
	any := false
	for _, a := range d.boot.PVA.Interfaces {
		if a.IsUnspecified() {
			if any {
				continue
			}
			any, a = true, netip.IPv4Unspecified()
		}
		listen = append(listen, netip.AddrPortFrom(a, port))
	}
	return listen
}

// tlsListener loads the keychain (pva.tls_keychain) and returns the TLS
// listener's options; without a keychain, none. A keychain that cannot be
// used refuses the start, with the reason.
func (d *Daemon) tlsListener(cfg *config.Config) (tcpsearch.Options, error) {
	if cfg.PVA.TLSKeychain == "" {
		return tcpsearch.Options{}, nil
	}
	cc, err := keychain.ParseOptions(cfg.PVA.TLSOptions)
	if err != nil {
		return tcpsearch.Options{}, fmt.Errorf("pva.tls_options: %w", err)
	}
	h, err := keychain.NewHolder(cfg.PVA.TLSKeychain, true, d.clk.Now())
	if err != nil {
		return tcpsearch.Options{}, fmt.Errorf("pva.tls_keychain (EPICS_PVAS_TLS_KEYCHAIN): %w", err)
	}
	d.Keys = h
	k := h.Current()
	d.log.Info("Secure PVAccess keychain loaded", zap.String("file", k.Path),
		zap.String("subject", k.Leaf.Subject.String()), zap.String("issuer", k.Leaf.Issuer.String()),
		zap.Time("not_after", k.NotAfter()))
	return tcpsearch.Options{TLSListen: d.listenOn(cfg.PVA.TLSPort), TLS: h.ServerConfig(cc)}, nil
}

// udpIPv6 says whether the UDP participant opens IPv6 sockets too: when
// the interface list has a wildcard (PVXS listens on [::] beside 0.0.0.0)
// or an IPv6 address.
func udpIPv6(ifaces []netip.Addr) bool {
	for _, a := range ifaces {
		if a.IsUnspecified() || a.Is6() {
			return true
		}
	}
	return false
}

func (d *Daemon) setReady(why string) {
	if d.ready.CompareAndSwap(false, true) {
		d.log.Info("ready", zap.String("because", why))
	}
}

// Ready reports readiness and, if not ready, why.
func (d *Daemon) Ready() (bool, string) {
	if d.ready.Load() {
		return true, ""
	}
	return false, d.readyWhy.Load().(string)
}

// Discover sends one discovery ping (empty protocol list, no names,
// MustReply) to every search destination and trusted relay; replies are
// treated as beacons, and the relays re-announce.
func (d *Daemon) Discover() error { return d.ping(true) }

// ping sends a discovery ping to every search destination and, with
// relays, to the trusted relays (relayPings). Periodic rounds leave the
// relays out: a relay re-announces every server it heard within
// beacon.expiry, so pinging it each round would keep a dead server alive
// here for that much longer; its live sightings keep the rest fresh.
func (d *Daemon) ping(relays bool) error {
	ping := pva.Search{Seq: pva.SearchSeqFind, Flags: pva.SearchMustReply, ReplyPort: d.UDP.ClientAddr().Port()}
	msg := pva.AppendSearch(nil, pva.FlagBigEndian, &ping)
	err := d.UDP.SendSearch(msg, nil)
	if !relays {
		return err
	}
	d.mu.Lock()
	to := d.relayPing
	d.mu.Unlock()
	if rerr := d.UDP.SendSearchTo(msg, to); err == nil {
		err = rerr
	}
	return err
}

// HTTPAddr is the bound HTTP listener address ("" when off).
func (d *Daemon) HTTPAddr() string {
	if d.httpLn == nil {
		return ""
	}
	return d.httpLn.Addr().String()
}

func (d *Daemon) listenHTTP() error {
	if d.boot.HTTP.Listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", d.boot.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("HTTP listener %s: %w", d.boot.HTTP.Listen, err)
	}
	d.httpLn = ln
	return nil
}

func (d *Daemon) serveHTTP() {
	if d.httpLn == nil {
		return
	}
	go func() {
		if err := d.httpSrv.Serve(d.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("HTTP server stopped", zap.Error(err))
		}
	}()
}

func (d *Daemon) loadSnapshot() bool {
	p := d.boot.Snapshot.Path
	if p == "" {
		return false
	}
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err := d.Registry.LoadSnapshot(p); err != nil {
		d.log.Warn("registry snapshot not loaded; starting empty", zap.String("path", p), zap.Error(err))
		return false
	}
	// Replicas are not probed: their beacons and discovery answers bring
	// them back.
	for _, s := range d.Registry.Servers() {
		if s.GUID.IsPvans() && s.Names == 0 {
			_ = d.Registry.RemoveServer(s.GUID)
		}
	}
	c := d.Registry.Counts()
	d.log.Info("registry snapshot loaded; entries unverified until confirmed", zap.String("path", p),
		zap.Int("servers", c.Servers), zap.Int("names", c.Names), zap.Duration("window", d.conf().Snapshot.UnverifiedWindow))
	// Re-probe every loaded server: a listing confirms it.
	for _, s := range d.Registry.Servers() {
		if d.conf().Access.ServerAllowed(s.Addr.Addr()) {
			d.Prober.Probe(s.GUID, s.Addr, probe.ReasonNew)
		}
	}
	return true
}

// SaveSnapshot writes the registry snapshot now.
func (d *Daemon) SaveSnapshot() error {
	if d.boot.Snapshot.Path == "" {
		return nil
	}
	return d.Registry.SaveSnapshot(d.boot.Snapshot.Path)
}

func (d *Daemon) periodicSnapshot() {
	if err := d.SaveSnapshot(); err != nil {
		d.log.Warn("registry snapshot not written", zap.String("path", d.boot.Snapshot.Path), zap.Error(err))
	}
	d.armSnapshot()
}

// armSnapshot schedules the next periodic save (snapshot.interval, read
// now so a reload applies from the next save on).
func (d *Daemon) armSnapshot() {
	iv := d.conf().Snapshot.Interval
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.snapTimer != nil {
		d.snapTimer.Stop()
	}
	if !d.closed && d.boot.Snapshot.Path != "" && iv > 0 {
		d.snapTimer = d.clk.AfterFunc(iv, d.periodicSnapshot)
	}
}

// Shutdown stops accepting, writes the snapshot and closes everything,
// within ctx's deadline.
func (d *Daemon) Shutdown(ctx context.Context) error {
	var err error
	d.shutdownOnce.Do(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = d.httpSrv.Shutdown(ctx)
			_ = d.TCP.Close()
			if serr := d.SaveSnapshot(); serr != nil {
				err = fmt.Errorf("snapshot: %w", serr)
			} else if d.boot.Snapshot.Path != "" {
				d.log.Info("registry snapshot written", zap.String("path", d.boot.Snapshot.Path))
			}
			d.Close()
		}()
		select {
		case <-done:
		case <-ctx.Done():
			err = fmt.Errorf("shutdown did not finish in time: %w", ctx.Err())
		}
	})
	return err
}

// Close stops every part without writing the snapshot.
func (d *Daemon) Close() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	if d.snapTimer != nil {
		d.snapTimer.Stop()
	}
	if d.discoverTmr != nil {
		d.discoverTmr.Stop()
	}
	if d.periodicTmr != nil {
		d.periodicTmr.Stop()
	}
	d.mu.Unlock()
	d.DNS.Close()
	d.Relay.Close()
	_ = d.httpSrv.Close()
	if d.httpLn != nil {
		_ = d.httpLn.Close() // bound but never served when Start failed later
	}
	_ = d.TCP.Close()
	_ = d.UDP.Close()
	d.Upstream.Close()
	d.Ring.Close()
	d.nameFiles.Close()
	d.Prober.Close()
	d.Tracker.Close()
	d.Resolver.Close()
	d.Insight.Close()
	d.Registry.Close()
	d.logBudget.Close() // its pending summaries now, not after Close
}

// ownHostNames are the names requests to the HTTP API may carry as Host
// without http.allowed_hosts: this host's name, and http.listen's host
// when it is a name rather than an address.
func ownHostNames(listen string) []string {
	var names []string
	if h, err := os.Hostname(); err == nil {
		names = append(names, h)
	}
	if h, _, err := net.SplitHostPort(listen); err == nil {
		if _, err := netip.ParseAddr(h); err != nil && h != "" {
			names = append(names, h)
		}
	}
	return httpapi.NormalizeHostNames(names)
}
