// Package dnswatch follows host names in DNS: it looks each one up again
// every refresh interval, keeps all its A and AAAA records (up to a cap),
// and tells its owner when an answer changed. It serves the daemon's
// address lists (static servers, search destinations, name servers, relay
// destinations) whose entries are host names, so an IOC pod restarted
// under a new address, or a headless service that grows a pod, is
// followed without a reload.
//
// It owns no list and decides nothing about what an address means: the
// daemon asks Addrs when it builds a list. Lookups run on goroutines of
// their own, bounded in number (names followed), concurrency and time,
// so nothing that answers a client ever waits for DNS. A failed lookup
// keeps the last answer; it is counted, and logged once until the name
// resolves again. Time comes from internal/clock, lookups from a Resolver,
// so tests need neither a DNS server nor sleeping.
package dnswatch

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/clock"
)

// Resolver looks a host name up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Watcher.
type Options struct {
	Resolver Resolver // nil: net.DefaultResolver
	Clock    clock.Clock
	Logger   *zap.Logger
	// Changed is called (from a lookup round's goroutine, never with a
	// lock held) after a round in which some name's addresses changed.
	Changed func()
}

// Settings are what a running watcher can change (a configuration
// reload): the names followed and the bounds. Each tag names the setting
// the field takes (config.Fill).
type Settings struct {
	// Names are the host names followed.
	Names []string
	// Refresh is the time between rounds; 0 stops them.
	Refresh time.Duration `setting:"dns.refresh"`
	// Timeout bounds one lookup (0: no bound); Concurrency the lookups at
	// once (at least one).
	Timeout     time.Duration
	Concurrency int
	// MaxNames bounds the names followed (the rest are not looked up,
	// counted); MaxAddresses the addresses kept per name.
	MaxNames     int
	MaxAddresses int
}

type entry struct {
	addrs  []netip.Addr // the last good answer; nil before one
	failed bool         // the last lookup failed (logged once)
}

// Watcher follows a set of names. Safe for concurrent use.
type Watcher struct {
	o Options

	mu      sync.Mutex
	lim     Settings // but its Names, which are names
	names   []string
	entries map[string]*entry
	timer   clock.Timer
	running bool // a round is under way
	again   bool // a round was asked for while one ran
	closed  bool

	counters // metrics.go
}

// New returns a watcher following nothing; Apply gives it
// work, Start its first round.
func New(o Options) *Watcher {
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return &Watcher{o: o, entries: map[string]*entry{}}
}

// Apply replaces the bounds, a changed refresh from the next round, and
// the names followed: a name kept keeps its answer; a new one has none
// until its first lookup (Addrs reports false).
func (w *Watcher) Apply(l Settings) {
	if l.Concurrency < 1 {
		l.Concurrency = 1
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.names = slices.Clone(l.Names)
	for n := range w.entries {
		if !slices.Contains(l.Names, n) {
			delete(w.entries, n)
		}
	}
	l.Names = nil
	w.lim = l
}

// Addrs is the last good answer for name (false: none yet, or not
// followed).
func (w *Watcher) Addrs(name string) ([]netip.Addr, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.entries[name]
	if e == nil || e.addrs == nil {
		return nil, false
	}
	return e.addrs, true
}

// Start runs a round now and then every Refresh.
func (w *Watcher) Start() { w.Refresh() }

// Refresh starts a round now (or right after the one running).
func (w *Watcher) Refresh() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if w.running {
		w.again = true
		return
	}
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.running = true
	go w.round()
}

// Close stops the rounds (a lookup running finishes and is dropped).
func (w *Watcher) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

// round looks every name up, at most Concurrency at once, and then arms
// the next round.
func (w *Watcher) round() {
	w.mu.Lock()
	lim := w.lim
	names := w.names
	if len(names) > lim.MaxNames && lim.MaxNames > 0 {
		w.namesDropped.Add(uint64(len(names) - lim.MaxNames))
		names = names[:lim.MaxNames]
	}
	w.mu.Unlock()

	type result struct {
		name  string
		addrs []netip.Addr
		err   error
	}
	results := make([]result, len(names))
	sem := make(chan struct{}, lim.Concurrency)
	var wg sync.WaitGroup
	for i, n := range names {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if lim.Timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, lim.Timeout)
			}
			defer cancel()
			addrs, err := w.o.Resolver.LookupNetIP(ctx, "ip", n)
			results[i] = result{n, addrs, err}
		}()
	}
	wg.Wait()

	changed := false
	w.mu.Lock()
	for _, r := range results {
		w.lookups.Add(1)
		e := w.entries[r.name]
		if e == nil {
			if !slices.Contains(w.names, r.name) {
				continue // dropped while looked up
			}
			e = &entry{}
			w.entries[r.name] = e
		}
		addrs := normalize(r.addrs)
		if r.err == nil && len(addrs) == 0 {
			r.err = errNoAddresses
		}
		if r.err != nil {
			w.failures.Add(1)
			if !e.failed {
				e.failed = true
				w.o.Logger.Warn("host name lookup failed; its last addresses are kept", zap.String("host", r.name),
					zap.Stringers("kept", e.addrs), zap.Error(r.err))
			}
			continue
		}
		if e.failed {
			e.failed = false
			w.o.Logger.Info("host name resolves again", zap.String("host", r.name), zap.Stringers("addresses", addrs))
		}
		if max := lim.MaxAddresses; max > 0 && len(addrs) > max {
			w.addrsDropped.Add(uint64(len(addrs) - max))
			addrs = addrs[:max]
		}
		if !slices.Equal(e.addrs, addrs) {
			if e.addrs != nil {
				w.changes.Add(1)
				w.o.Logger.Info("host name resolves to new addresses", zap.String("host", r.name),
					zap.Stringers("was", e.addrs), zap.Stringers("now", addrs))
			}
			e.addrs = addrs
			changed = true
		}
	}
	w.running = false
	again := w.again
	w.again = false
	if !w.closed {
		if again {
			w.running = true
			go w.round()
		} else if lim.Refresh > 0 {
			w.timer = w.o.Clock.AfterFunc(lim.Refresh, w.Refresh)
		}
	}
	w.mu.Unlock()
	if changed && w.o.Changed != nil {
		w.o.Changed()
	}
}

type lookupError string

func (e lookupError) Error() string { return string(e) }

const errNoAddresses = lookupError("no addresses")

// normalize unmaps, drops zones and invalid or repeated addresses, and
// sorts (IPv4 first), so equal answers in another order are equal.
func normalize(in []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(in))
	for _, a := range in {
		a = a.Unmap().WithZone("")
		if a.IsValid() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

// Names is the number of names followed now.
func (w *Watcher) Names() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lim.MaxNames > 0 {
		return min(len(w.names), w.lim.MaxNames)
	}
	return len(w.names)
}
