package httpapi

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/limitlog"
)

// Fixed bounds of the HTTP listener. The connection counts and the
// discovery interval are settings (Limits); these need no tuning.
const (
	// ReadHeaderTimeout and ReadTimeout bound a request's arrival: a
	// client trickling its headers or body is closed.
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	// WriteTimeout bounds one answer, listings and /metrics included.
	WriteTimeout = 30 * time.Second
	// IdleTimeout closes an idle keep-alive connection.
	IdleTimeout = 60 * time.Second
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes = 16 << 10
	// MaxBodyBytes bounds a request body; only POST /v1/discover reads one.
	MaxBodyBytes = 4 << 10
	// MaxMatchBytes and MaxMatchWildcards bound a /v1/names match pattern:
	// matching a glob costs up to its length × a name's length per name.
	MaxMatchBytes     = 256
	MaxMatchWildcards = 16
	// ListTimeout bounds the time one listing may scan; a listing that
	// runs out is answered 503 (narrow the match).
	ListTimeout = 5 * time.Second
	// MaxListings is the listings scanning at once; more are answered 503.
	MaxListings = 2
	// WaitMargin: a GET /v1/changes wait ends this long before
	// WriteTimeout (25 s at most by default), so its answer is written in
	// time. At most half of MaxConns requests wait at once.
	WaitMargin = 5 * time.Second
)

// The bounds the daemon gives Limits (issue 40: constants, not settings;
// docs/SECURITY.md, "The HTTP endpoint").
const (
	// DefaultMaxConns: the API serves a few operators, Prometheus and a
	// status page; 3,000 idle connections held 64 descriptors (test/hostile).
	DefaultMaxConns = 64
	// DefaultMaxConnsPerSource keeps one host from taking them all.
	DefaultMaxConnsPerSource = 16
	// DefaultShowDownFor: an operator used to a CA gateway's or a
	// monitoring system's "down" row looks for the server that went away;
	// an hour covers a shift's look at the page, and a server back at its
	// endpoint leaves at once.
	DefaultShowDownFor = time.Hour
	// DefaultDiscoverInterval: at most one POST /v1/discover round per
	// interval (extra requests get 429), so the endpoint cannot be used
	// to make pvans broadcast; an operator's button press or a deploy
	// hook needs no more, and discovery.interval sends rounds anyway.
	DefaultDiscoverInterval = 10 * time.Second
)

// Limits are the HTTP listener's settings; a zero bound is no bound (the
// daemon passes the http.* settings and the Default bounds above). Each
// tag names the setting the field takes (config.Fill).
type Limits struct {
	// MaxConns bounds open connections; extra ones are closed at accept.
	MaxConns int
	// MaxConnsPerSource bounds one client address's open connections.
	MaxConnsPerSource int
	// DiscoverInterval: at most one POST /v1/discover round per interval;
	// extra requests are answered 429.
	DiscoverInterval time.Duration
	// AllowedHosts are the DNS names, beyond addresses, localhost and
	// Options.HostNames, that requests may name as Host (host.go).
	AllowedHosts []string `setting:"http.allowed_hosts"`
	// ShowDownFor is how long Options.Down's servers are shown (0: none).
	ShowDownFor time.Duration
	// The timeouts; zero = the constants above (tests shorten them).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

func (l Limits) withDefaults() Limits {
	l.AllowedHosts = NormalizeHostNames(l.AllowedHosts)
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&l.ReadHeaderTimeout, ReadHeaderTimeout}, {&l.ReadTimeout, ReadTimeout}, {&l.WriteTimeout, WriteTimeout}, {&l.IdleTimeout, IdleTimeout}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	return l
}

// Service is the hardened HTTP listener serving Handler.
type Service struct {
	srv    *http.Server
	lim    *atomic.Pointer[Limits]
	cnt    *counters
	ll     *limitlog.Log
	closed chan struct{}
	once   sync.Once
	// webConfig is the exporter-toolkit web configuration file; "" serves
	// plain HTTP without authentication.
	webConfig string
	log       *zap.Logger
	tls       atomic.Bool // Serve found TLS on in webConfig
}

// New returns the HTTP server for o with every bound applied. Serve
// it with Serve.
func New(o Options) *Service {
	o.Limits = o.Limits.withDefaults()
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	cnt := new(counters)
	o.cnt = cnt
	o.lim = new(atomic.Pointer[Limits])
	o.lim.Store(&o.Limits)
	s := &Service{lim: o.lim, cnt: cnt, ll: limitlog.New(o.Logger, 0, nil), closed: make(chan struct{}),
		webConfig: o.WebConfigFile, log: o.Logger}
	o.closing = s.closed
	// HTTP/1.1 only, with TLS too: the connection bounds and timeouts are
	// per connection, which HTTP/2's streams would multiply.
	var protos http.Protocols
	protos.SetHTTP1(true)
	s.srv = &http.Server{
		Protocols:         &protos,
		Handler:           Handler(o),
		ReadHeaderTimeout: o.Limits.ReadHeaderTimeout,
		ReadTimeout:       o.Limits.ReadTimeout,
		WriteTimeout:      o.Limits.WriteTimeout,
		IdleTimeout:       o.Limits.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          errorLog(s.ll),
	}
	return s
}

// Apply applies new connection bounds (from the next accepted
// connection; open ones are not closed) and a new discovery interval (from
// the next POST /v1/discover). The timeouts are the http.Server's, fixed
// once it serves: Apply keeps the ones in force.
func (s *Service) Apply(l Limits) {
	cur := s.lim.Load()
	l.ReadHeaderTimeout, l.ReadTimeout, l.WriteTimeout, l.IdleTimeout = cur.ReadHeaderTimeout, cur.ReadTimeout, cur.WriteTimeout, cur.IdleTimeout
	l = l.withDefaults()
	s.lim.Store(&l)
}

// Serve accepts on ln until Shutdown or Close. With a web configuration
// file, exporter-toolkit serves: it reads the file again for every
// request (basic_auth_users, headers) and every TLS handshake
// (certificates, client CAs), so an edited file applies without a reload;
// whether TLS is on at all is decided here, once.
func (s *Service) Serve(ln net.Listener) error {
	l := &limitListener{Listener: ln, s: s, bySource: make(map[netip.Addr]int),
		backoff: limitlog.Backoff{Log: s.ll, Kind: "http_accept"}}
	if s.webConfig == "" {
		return s.srv.Serve(l)
	}
	on, err := CheckWebConfig(s.webConfig)
	if err != nil {
		return err
	}
	s.tls.Store(on)
	return web.Serve(l, s.srv, &web.FlagConfig{WebConfigFile: &s.webConfig},
		slog.New(&slogToZap{l: s.log, ll: s.ll}))
}

// TLS reports whether the listener serves TLS (known once Serve runs).
func (s *Service) TLS() bool { return s.tls.Load() }

// Shutdown stops accepting and waits for open requests (see http.Server).
func (s *Service) Shutdown(ctx context.Context) error {
	s.once.Do(func() { close(s.closed) })
	return s.srv.Shutdown(ctx)
}

// Close closes the listener and every connection.
func (s *Service) Close() error {
	s.once.Do(func() { close(s.closed) })
	return s.srv.Close()
}

// limitListener closes connections beyond the limits at accept, and backs
// off on accept errors (EMFILE…) instead of handing them to http.Server,
// which would log each one.
type limitListener struct {
	net.Listener
	s        *Service
	backoff  limitlog.Backoff
	mu       sync.Mutex
	bySource map[netip.Addr]int
}

func (l *limitListener) Accept() (net.Conn, error) {
	s := l.s
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			s.cnt.acceptErrors.Add(1)
			l.backoff.Failed(err, s.closed)
			select {
			case <-s.closed:
				return nil, net.ErrClosed
			default:
			}
			continue
		}
		l.backoff.OK()
		var src netip.Addr
		if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			src = ta.AddrPort().Addr().Unmap()
		}
		lim := s.lim.Load()
		l.mu.Lock()
		full := lim.MaxConns > 0 && s.cnt.open.Load() >= int64(lim.MaxConns)
		if !full && (lim.MaxConnsPerSource <= 0 || l.bySource[src] < lim.MaxConnsPerSource) {
			l.bySource[src]++
			s.cnt.open.Add(1)
			l.mu.Unlock()
			return &trackedConn{Conn: c, l: l, src: src}, nil
		}
		l.mu.Unlock()
		if full {
			s.cnt.rejected.Add(1)
			s.ll.Hit("http_max_connections", "HTTP connection limit reached; new connections closed",
				zap.Int("max_connections", lim.MaxConns), zap.Stringer("client", src))
		} else {
			s.cnt.perSource.Add(1)
			s.ll.Hit("http_connections_per_source", "HTTP connections per source limit reached; new connections from it closed",
				zap.Int("max_connections_per_source", lim.MaxConnsPerSource), zap.Stringer("client", src))
		}
		c.Close()
	}
}

func (l *limitListener) release(src netip.Addr) {
	l.mu.Lock()
	if n := l.bySource[src] - 1; n > 0 {
		l.bySource[src] = n
	} else {
		delete(l.bySource, src)
	}
	l.s.cnt.open.Add(-1)
	l.mu.Unlock()
}

type trackedConn struct {
	net.Conn
	l    *limitListener
	src  netip.Addr
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.src) })
	return err
}

// errorLog is net/http's error log (failed TLS handshakes and the like;
// accept errors never reach it) as rate-limited warnings: any client can
// cause a line per connection, a port scanner against a TLS listener one
// each.
func errorLog(ll *limitlog.Log) *log.Logger {
	return log.New(logWriter{ll}, "", 0)
}

type logWriter struct{ ll *limitlog.Log }

func (w logWriter) Write(p []byte) (int, error) {
	w.ll.Hit("http_server_error", "HTTP server: "+strings.TrimSpace(string(p)))
	return len(p), nil
}
