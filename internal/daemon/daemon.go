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
	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/httpapi"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/probe"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
	"github.com/pvans-project/pvans/internal/registry"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/searchring"
	"github.com/pvans-project/pvans/internal/serverpv"
	"github.com/pvans-project/pvans/internal/tcpsearch"
	"github.com/pvans-project/pvans/internal/udpsearch"
	"github.com/pvans-project/pvans/internal/upstream"
)

// DiscoverySettle is how long after a discovery ping the daemon waits for
// replies before calling itself ready (pvAccessCPP answers after a random
// 50-150 ms; a loaded host is slower).
const DiscoverySettle = 2 * time.Second

// Daemon is one running pvans.
type Daemon struct {
	cfg     *config.Config
	log     *zap.Logger
	clk     clock.Clock
	guid    pva.GUID
	started time.Time

	Registry *registry.Registry
	Resolver *resolver.Resolver
	Tracker  *beacon.Tracker
	Prober   *probe.Prober
	Ring     *searchring.Ring
	UDP      *udpsearch.Server
	TCP      *tcpsearch.Server
	Upstream *upstream.Pool
	Events   *events.Log
	Metrics  *metrics.Metrics

	nameFiles *probe.NameFiles
	httpSrv   *httpapi.Service
	httpLn    net.Listener            // nil when the HTTP endpoint is off
	addrList  []udpsearch.Destination // search destinations: configured plus automatic

	deniedServers atomic.Uint64 // sightings and answers refused by the server allow list

	ready        atomic.Bool
	readyWhy     atomic.Value // string
	snapTimer    clock.Timer
	discoverTmr  clock.Timer
	mu           sync.Mutex
	closed       bool
	shutdownOnce sync.Once
}

// Options are what cmd/pvans decides besides the Config.
type Options struct {
	Logger *zap.Logger
	Clock  clock.Clock
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
	d := &Daemon{cfg: cfg, log: o.Logger, clk: o.Clock, started: time.Now(), Events: events.New(500)}
	if _, err := rand.Read(d.guid[:]); err != nil {
		return nil, fmt.Errorf("daemon GUID: %w", err)
	}
	d.readyWhy.Store("starting")
	d.Registry = registry.New(registry.Options{
		MaxServers:    cfg.Registry.MaxServers,
		MaxNames:      cfg.Registry.MaxNames,
		FieldNames:    cfg.Registry.FieldNames,
		UnverifiedTTL: cfg.Snapshot.UnverifiedWindow,
		Clock:         d.clk,
		Logger:        d.log.Named("registry"),
	})
	d.Resolver = resolver.New(d.Registry, resolver.Options{
		MaxWaitsPerClient: cfg.TCP.WaitersPerConnection,
		MaxWaitsPerSource: cfg.TCP.WaitersPerSource,
		MaxWaiters:        cfg.TCP.WaitersTotal,
		MaxNameBytes:      cfg.Search.MaxNameBytes,
		NameAllowed:       nameFilter(&cfg.Access),
		Clock:             d.clk,
		Logger:            d.log.Named("resolver"),
	})
	d.Tracker = beacon.New(beacon.Options{
		Clock:         d.clk,
		Expiry:        cfg.Beacon.Expiry,
		CheckInterval: cfg.Beacon.CheckInterval,
		Limit:         cfg.Registry.MaxServers,
		OnEvent:       d.onBeaconEvent,
		Logger:        d.log.Named("beacon"),
	})
	d.Metrics = metrics.New(buildinfo.Get())
	d.Prober = probe.New(probe.Options{
		Sink:         probeSink{d},
		Clock:        d.clk,
		Concurrency:  cfg.Probe.Concurrency,
		EchoInterval: cfg.Probe.EchoInterval,
		ProbeTimeout: cfg.Probe.Timeout,
		Reprobe:      cfg.Probe.ReprobeInterval,
		Backoff:      probeBackoff(cfg),
		Conn:         connOptions(cfg.Probe.Conn),
		Logger:       d.log.Named("probe"),
		Observe:      probe.MetricsObserver(d.Metrics),
	})
	d.nameFiles = &probe.NameFiles{Dir: cfg.Static.NamesDir, Sink: serverAccessSink{probeSink{d}}, Clock: d.clk, Logger: d.log.Named("static")}

	d.TCP = tcpsearch.New(tcpsearch.Options{
		Listen:     d.tcpListen(),
		GUID:       d.guid,
		AddressMap: cfg.Map.Rules,
		MaxConns:   cfg.TCP.MaxConnections,
		// One address cannot fill MaxConns.
		MaxConnsPerSource: cfg.TCP.MaxConnectionsPerSource,
		Conn:              clientConnOptions(cfg),
		Channels:          serverpv.New("pvans " + buildinfo.Get()),
		Logger:            d.log.Named("tcp"),
		ClientAllowed:     tcpClientFilter(&cfg.Access),
		MessageRate:       cfg.RateLimit.TCPMessagesPerSecond,
		MessageBurst:      cfg.RateLimit.TCPMessageBurst,
		RateExempt:        cfg.RateLimit.Exempt,
		Clock:             d.clk,
	}, tcpsearch.FromResolver(d.Resolver))

	var auto []netip.AddrPort
	if cfg.PVA.AutoAddrList || (cfg.UDP.SendBeacons && cfg.PVA.AutoBeaconAddrList) {
		var aerr error
		if auto, aerr = udpsearch.AutoAddrList(cfg.PVA.BroadcastPort); aerr != nil {
			d.log.Warn("cannot read interface broadcast addresses for the auto address lists", zap.Error(aerr))
		}
	}
	d.addrList = destinations(cfg.PVA.AddrList)
	if cfg.PVA.AutoAddrList {
		d.addrList = append(d.addrList, udpsearch.Unicast(auto...)...)
	}
	beaconList := destinations(cfg.PVA.BeaconAddrList)
	if cfg.UDP.SendBeacons && cfg.PVA.AutoBeaconAddrList {
		beaconList = append(beaconList, udpsearch.Unicast(auto...)...)
	}
	var ifaces []netip.Addr
	for _, a := range cfg.PVA.Interfaces {
		if !a.IsUnspecified() {
			ifaces = append(ifaces, a)
		}
	}
	d.UDP = udpsearch.Build(udpsearch.Options{
		Port:             cfg.PVA.BroadcastPort,
		Interfaces:       ifaces,
		IgnoreAddrs:      cfg.PVA.IgnoreAddrList,
		GUID:             d.guid,
		AddressMap:       cfg.Map.Rules,
		TCPPort:          cfg.PVA.ServerPort, // the bound port, if 0 was asked, is set in Start
		AnswerNames:      cfg.UDP.AnswerSearches,
		ReceiveBuffer:    int(cfg.UDP.ReceiveBufferBytes),
		AddrList:         d.addrList,
		SendBeacons:      cfg.UDP.SendBeacons,
		BeaconAddrList:   beaconList,
		Resolver:         d.Resolver,
		Beacons:          beaconFilter{d},
		BeaconQueue:      cfg.UDP.BeaconQueue, // issue 14: the receive path never waits for the registry
		OnSearchResponse: d.onUDPSearchResponse,
		Clock:            d.clk,
		ClientAllowed:    udpClientFilter(&cfg.Access),
		SearchRate:       cfg.RateLimit.UDPSearchesPerSecond,
		SearchBurst:      cfg.RateLimit.UDPSearchBurst,
		ReflectionRatio:  cfg.RateLimit.ReflectionRatio,
		ReflectionWindow: cfg.RateLimit.ReflectionWindow,
		LimitExempt:      cfg.RateLimit.Exempt,
		Logger:           d.log.Named("udp"),
	})

	ring, err := searchring.New(searchring.Options{
		Clock:       d.clk,
		Transport:   ringTransport{d},
		IgnoreGUIDs: []pva.GUID{d.guid},
		Resolved:    d.onSearchResolved,
		Duplicate:   d.onSearchDuplicate,
		Logger:      d.log.Named("searchring"),
		// issue 14: bounded however many names clients wait for.
		MaxChannels:        cfg.Search.ThroughMaxNames,
		DatagramsPerSecond: cfg.Search.ThroughDatagramsPerSecond,
	})
	if err != nil {
		return nil, fmt.Errorf("search ring: %w", err)
	}
	d.Ring = ring
	d.Upstream = upstream.New(upstream.Options{
		Servers: cfg.PVA.NameServers,
		Conn:    upstreamConnOptions(cfg),
		OnReply: func(from netip.AddrPort, m *pva.SearchResponse) { d.Ring.OnReply(from, true, m) },
		OnReady: func(netip.AddrPort) { d.Ring.Poke(searchring.PokeNameServer) },
		Clock:   d.clk,
		Logger:  d.log.Named("upstream"),
	})
	if cfg.Search.Through {
		d.Resolver.SetSearcher(d.Ring)
	}
	d.httpSrv = httpapi.NewService(httpapi.Options{
		Registry: regView{d.Registry, d.Tracker},
		Events:   d.Events,
		Metrics:  d.Metrics.Handler(),
		Ready:    d.Ready,
		Discover: d.operatorDiscover,
		Version:  buildinfo.Get(),
		Started:  d.started,
		Told: func(server netip.AddrPort, client netip.Addr) (pva.Address, uint16) {
			return resolver.Endpoint{Addr: server}.Wire(client, cfg.Map.Rules)
		},
		// issue 14: connection limits, timeouts, bounded bodies and
		// patterns, discovery rate limit.
		Limits: httpapi.Limits{
			MaxConns:          cfg.HTTP.MaxConnections,
			MaxConnsPerSource: cfg.HTTP.MaxConnectionsPerSource,
			DiscoverInterval:  cfg.HTTP.DiscoverInterval,
		},
		Logger: d.log.Named("http"),
	})
	// pvans's own beacons tell peers what it answers moved.
	d.Registry.SubscribeChanges(d.UDP.BumpChangeCount)
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
	cfg := d.cfg
	snapLoaded := d.loadSnapshot()
	d.dropDeniedSnapshotServers()

	// Sockets. The TCP name server first: its port is what discovery
	// answers and beacons carry.
	if err := d.TCP.Listen(); err != nil {
		return fmt.Errorf("TCP name-server listener on %v: %w", d.tcpListen(), err)
	}
	if as := d.TCP.Addrs(); len(as) > 0 {
		d.UDP.SetTCPPort(as[0].Port())
	}
	if err := d.UDP.Listen(); err != nil {
		return fmt.Errorf("UDP search port %d: %w", cfg.PVA.BroadcastPort, err)
	}
	d.Ring.SetReplyPort(d.UDP.ClientAddr().Port())
	if err := d.listenHTTP(); err != nil {
		return err
	}

	// Receiving.
	d.TCP.Serve()
	d.UDP.Start()
	d.Upstream.Start()
	d.Tracker.Start()
	d.Prober.SetStatic(d.allowedStatic(cfg.Static.Servers))
	d.nameFiles.Start()
	d.serveHTTP()
	if cfg.Snapshot.Path != "" && cfg.Snapshot.Interval > 0 {
		d.mu.Lock()
		d.snapTimer = d.clk.AfterFunc(cfg.Snapshot.Interval, d.periodicSnapshot)
		d.mu.Unlock()
	}

	switch {
	case cfg.Search.DiscoveryAtStart && len(d.addrList) > 0:
		if derr := d.Discover(); derr != nil {
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
		zap.Stringers("search_destinations", d.addrList),
		zap.Stringers("name_servers", cfg.PVA.NameServers),
		zap.Bool("search_through", cfg.Search.Through),
		zap.String("http", d.HTTPAddr()))
	return nil
}

func (d *Daemon) tcpListen() []netip.AddrPort {
	var listen []netip.AddrPort
	for _, a := range d.cfg.PVA.Interfaces {
		listen = append(listen, netip.AddrPortFrom(a, d.cfg.PVA.ServerPort))
	}
	return listen
}

// destinations carries the address lists' multicast TTLs and interfaces
// to the UDP participant.
func destinations(l []config.Endpoint) []udpsearch.Destination {
	out := make([]udpsearch.Destination, len(l))
	for i, e := range l {
		out[i] = udpsearch.Destination{Addr: e.AddrPort, TTL: e.TTL, Iface: e.Iface}
	}
	return out
}

// connOptions turns a config connection profile into connection options.
func connOptions(p config.ConnProfile) pvaconn.Options {
	return pvaconn.Options{MaxMessage: int(p.MaxMessageBytes), SendQueueBytes: int(p.SendQueueBytes),
		HandshakeTimeout: p.HandshakeTimeout, MessageTimeout: p.MessageTimeout}
}

// clientConnOptions: the clients profile, closed after tcp.idle_timeout of
// silence (clients echo; the listener does not).
func clientConnOptions(cfg *config.Config) pvaconn.Options {
	o := connOptions(cfg.ClientConn())
	o.IdleTimeout = cfg.TCP.IdleTimeout
	return o
}

// upstreamConnOptions: the probes profile with PVXS's client timers, as a
// PVXS client keeps its name-server connections.
func upstreamConnOptions(cfg *config.Config) pvaconn.Options {
	o := connOptions(cfg.Probe.Conn)
	o.IdleTimeout, o.EchoInterval = cfg.PVA.TCPTimeout(), cfg.PVA.EchoInterval()
	return o
}

// probeBackoff: the bounds are settings, the shape (doubling, ±20 %) is
// the prober's.
func probeBackoff(cfg *config.Config) probe.Backoff {
	b := probe.DefaultBackoff
	b.Min, b.Max = cfg.Probe.BackoffMin, cfg.Probe.BackoffMax
	return b
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
// MustReply) to every search destination; replies are treated as beacons.
func (d *Daemon) Discover() error {
	ping := pva.Search{Seq: pva.SearchSeqFind, Flags: pva.SearchMustReply, ReplyPort: d.UDP.ClientAddr().Port()}
	msg := pva.AppendSearch(nil, pva.FlagBigEndian, &ping)
	d.Events.Add(events.Event{At: time.Now(), Kind: "discovery", Detail: "discovery ping sent"})
	return d.UDP.SendSearch(msg, nil)
}

// HTTPAddr is the bound HTTP listener address ("" when off).
func (d *Daemon) HTTPAddr() string {
	if d.httpLn == nil {
		return ""
	}
	return d.httpLn.Addr().String()
}

func (d *Daemon) listenHTTP() error {
	if d.cfg.HTTP.Listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", d.cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("HTTP listener %s: %w", d.cfg.HTTP.Listen, err)
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
	p := d.cfg.Snapshot.Path
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
	c := d.Registry.Counts()
	d.log.Info("registry snapshot loaded; entries unverified until confirmed", zap.String("path", p),
		zap.Int("servers", c.Servers), zap.Int("names", c.Names), zap.Duration("window", d.cfg.Snapshot.UnverifiedWindow))
	// Re-probe every loaded server: a listing confirms it.
	for _, s := range d.Registry.Servers() {
		if d.cfg.Access.ServerAllowed(s.Addr.Addr()) {
			d.Prober.Probe(s.GUID, s.Addr, probe.ReasonNew)
		}
	}
	return true
}

// SaveSnapshot writes the registry snapshot now.
func (d *Daemon) SaveSnapshot() error {
	if d.cfg.Snapshot.Path == "" {
		return nil
	}
	return d.Registry.SaveSnapshot(d.cfg.Snapshot.Path)
}

func (d *Daemon) periodicSnapshot() {
	if err := d.SaveSnapshot(); err != nil {
		d.log.Warn("registry snapshot not written", zap.String("path", d.cfg.Snapshot.Path), zap.Error(err))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.snapTimer = d.clk.AfterFunc(d.cfg.Snapshot.Interval, d.periodicSnapshot)
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
			} else if d.cfg.Snapshot.Path != "" {
				d.log.Info("registry snapshot written", zap.String("path", d.cfg.Snapshot.Path))
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
	d.mu.Unlock()
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
	d.Registry.Close()
}

// Reload applies what can change without a restart (currently: nothing
// beyond the log level, which cmd/pvans applies) and reports the keys that
// need a restart.
func (d *Daemon) Reload(next *config.Config) (restartNeeded []string) {
	for _, k := range config.Changed(d.cfg, next) {
		if k == "log.level" || k == "log.format" {
			continue
		}
		restartNeeded = append(restartNeeded, k)
	}
	return restartNeeded
}
