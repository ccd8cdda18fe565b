// Package bench is a load generator for PVA name resolution: it drives a
// target (pvans, or any PVA server) with CMD_SEARCH over UDP or over TCP
// and measures what comes back.
//
// Searches are packed as a PVXS client packs them (up to 1400 bytes, or a
// fixed number of names per message), from a list of names that exist
// (hits) interleaved with generated names that do not (misses) in a chosen
// fraction. Each message carries its own searchSequenceID, so the first
// reply to a message gives its latency and every reply's CIDs count as
// claims.
//
// Modes, and what they measure:
//
//   - UDP: datagrams go from one socket to Target with at most Window
//     unanswered at a time. A target sends nothing for a search in which it
//     claims no name (unless MustReply), so such datagrams only leave the
//     window when Timeout expires. For latency use MustReply (every datagram
//     is answered once per responding server) or HitFraction 1; for the
//     target's throughput with misses, pace with Rate and read the target's
//     CPU per datagram (PID), not the reply rate.
//   - TCP: Conns connections, each doing the PVA client handshake, then
//     pipelining searches (Unicast flag, reply port 0, big endian, as PVXS
//     sends them to a name server) with at most Window unanswered per
//     connection. The same MustReply/Timeout rules apply.
//
// A run stops by itself after Count messages or Duration, whichever comes
// first, then waits up to Timeout for outstanding replies.
//
// For a UDP target on loopback the report also gives the datagrams the
// kernel dropped at the target's port over the run (/proc/net/udp, every
// socket bound to that port): at saturation, handled = sent − dropped.
//
// The package owns the load generator only; it has no knowledge of the
// target's internals beyond the wire protocol and /proc/<pid>/stat.
package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
)

// Mode is the transport searches go over.
type Mode string

// Modes.
const (
	UDP Mode = "udp"
	TCP Mode = "tcp"
)

// Config describes one run.
type Config struct {
	Mode   Mode
	Target netip.AddrPort
	// Hits are names the target is expected to claim (e.g. a sim site's
	// names). HitFraction of the searched names are drawn from them (in
	// order, cycling); the rest are generated misses.
	Hits        []string
	HitFraction float64
	// Distinct is the number of distinct (CID, name) pairs cycled through;
	// default: enough that every hit appears once (or 10000 with no hits).
	Distinct int
	// MissLen is the length of generated miss names (default: mean hit
	// length, or 20).
	MissLen int
	// NamesPerMsg caps names per message; 0 packs to 1400 bytes as PVXS.
	NamesPerMsg int
	Window      int // unanswered messages allowed (per connection for TCP), default 64
	Conns       int // TCP connections, default 1
	// Count stops the run after this many messages (0: no limit).
	Count int64
	// Duration stops the run after this long (default 5 s if Count is 0).
	Duration time.Duration
	// Rate paces the total send rate in messages/s (0: as fast as the
	// window allows).
	Rate      float64
	MustReply bool
	// Timeout releases a window slot whose message got no reply, and bounds
	// the final drain (default 500 ms).
	Timeout time.Duration
	// PID, when non-zero, is the target's process: its CPU time over the
	// run is read from /proc/<pid>/stat.
	PID int
}

func (c *Config) defaults() error {
	if c.Mode != UDP && c.Mode != TCP {
		return fmt.Errorf("bench: mode %q: want udp or tcp", c.Mode)
	}
	if !c.Target.IsValid() {
		return errors.New("bench: no target address")
	}
	if c.HitFraction < 0 || c.HitFraction > 1 || math.IsNaN(c.HitFraction) {
		return errors.New("bench: HitFraction must be in [0,1]")
	}
	if c.HitFraction > 0 && len(c.Hits) == 0 {
		return errors.New("bench: HitFraction > 0 but no hit names")
	}
	if c.Window <= 0 {
		c.Window = 64
	}
	if c.Conns <= 0 {
		c.Conns = 1
	}
	if c.Mode == UDP {
		c.Conns = 1
	}
	if c.Timeout <= 0 {
		c.Timeout = 500 * time.Millisecond
	}
	if c.Count <= 0 && c.Duration <= 0 {
		c.Duration = 5 * time.Second
	}
	if c.Count < 0 || c.Rate < 0 || c.NamesPerMsg < 0 {
		return errors.New("bench: negative Count, Rate or NamesPerMsg")
	}
	if c.MissLen <= 0 {
		c.MissLen = 20
		if len(c.Hits) > 0 {
			total := 0
			for _, h := range c.Hits {
				total += len(h)
			}
			c.MissLen = max(total/len(c.Hits), 12)
		}
	}
	if c.Distinct <= 0 {
		c.Distinct = 10000
		if c.HitFraction > 0 {
			c.Distinct = int(math.Ceil(float64(len(c.Hits)) / c.HitFraction))
		}
	}
	return nil
}

// nameStream returns the (CID, name) pairs a run cycles through and how
// many of them are hits: hits spread evenly at HitFraction.
func nameStream(c *Config) ([]pva.SearchName, []bool) {
	names := make([]pva.SearchName, c.Distinct)
	hit := make([]bool, c.Distinct)
	h, m := 0, 0
	for k := range names {
		var n string
		if math.Floor(float64(k+1)*c.HitFraction) > math.Floor(float64(k)*c.HitFraction) {
			n = c.Hits[h%len(c.Hits)]
			h++
			hit[k] = true
		} else {
			n = missName(m, c.MissLen)
			m++
		}
		names[k] = pva.SearchName{CID: uint32(k), Name: []byte(n)}
	}
	return names, hit
}

// missName is a name nobody serves, padded to length n.
func missName(i, n int) string {
	s := "bench:miss:" + strconv.Itoa(i)
	for len(s) < n {
		s += "x"
	}
	return s
}

// template is one prebuilt search message; the sender copies it and
// writes a fresh searchSequenceID.
type template struct {
	msg   []byte
	names int
	hits  int
}

const seqOff = pva.HeaderSize // searchSequenceID is the first payload field

func buildTemplates(c *Config, replyPort uint16, flags uint8) ([]template, error) {
	names, hit := nameStream(c)
	p := pva.NewSearchPacker(replyPort)
	p.Flags = flags
	var out []template
	chunk := len(names)
	if c.NamesPerMsg > 0 {
		chunk = c.NamesPerMsg
	}
	for at := 0; at < len(names); at += chunk {
		part := names[at:min(at+chunk, len(names))]
		err := p.Pack(part, func(d []byte) {
			h, payload, _, _ := pva.SplitMessage(d)
			var s pva.Search
			_ = s.Decode(payload, h.BigEndian())
			n := 0
			for _, sn := range s.Names {
				if hit[sn.CID] {
					n++
				}
			}
			out = append(out, template{msg: slices.Clone(d), names: len(s.Names), hits: n})
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// tracker holds one sender's unanswered messages and the window.
type tracker struct {
	mu      sync.Mutex
	pending map[uint32]time.Time
	slots   chan struct{}
	stats   *stats
}

func newTracker(window int, st *stats) *tracker {
	return &tracker{pending: make(map[uint32]time.Time, window), slots: make(chan struct{}, window), stats: st}
}

// acquire waits for a window slot.
func (t *tracker) acquire(ctx context.Context) bool {
	select {
	case t.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (t *tracker) sent(seq uint32, at time.Time) {
	t.mu.Lock()
	t.pending[seq] = at
	t.mu.Unlock()
}

// reply records one search response; the first reply to a message gives
// its latency and frees its slot.
func (t *tracker) reply(seq uint32, claims int, at time.Time) {
	t.stats.replies.Add(1)
	t.stats.claims.Add(int64(claims))
	t.mu.Lock()
	sent, ok := t.pending[seq]
	if ok {
		delete(t.pending, seq)
		t.stats.addLatency(at.Sub(sent))
	}
	t.mu.Unlock()
	if ok {
		<-t.slots
	}
}

// expire frees the slots of messages older than timeout.
func (t *tracker) expire(now time.Time, timeout time.Duration) {
	t.mu.Lock()
	n := 0
	for seq, at := range t.pending {
		if now.Sub(at) >= timeout {
			delete(t.pending, seq)
			n++
		}
	}
	t.mu.Unlock()
	t.stats.timeouts.Add(int64(n))
	for range n {
		<-t.slots
	}
}

func (t *tracker) outstanding() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}

// stats are shared by every sender of a run.
type stats struct {
	messages, names, hits     atomic.Int64
	replies, claims, timeouts atomic.Int64

	start, sendEnd time.Time // rates are over the send phase

	mu  sync.Mutex
	lat []time.Duration
}

func (s *stats) endSend() {
	s.mu.Lock()
	if s.sendEnd.IsZero() {
		s.sendEnd = time.Now()
	}
	s.mu.Unlock()
}

// maxSamples bounds latency memory; past it every other sample is kept.
const maxSamples = 1 << 22

func (s *stats) addLatency(d time.Duration) {
	s.mu.Lock()
	if len(s.lat) < maxSamples {
		s.lat = append(s.lat, d)
	} else {
		s.lat[len(s.lat)-1-int(s.replies.Load())%(maxSamples/2)] = d
	}
	s.mu.Unlock()
}

// pacer spaces sends at a fixed rate; zero rate never waits.
type pacer struct {
	start    time.Time
	interval time.Duration
	n        int64
}

func (p *pacer) wait(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	if p.interval <= 0 {
		return true
	}
	due := p.start.Add(time.Duration(p.n) * p.interval)
	p.n++
	if d := time.Until(due); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// budget hands out message numbers until Count is reached.
type budget struct {
	left  atomic.Int64
	limit bool
}

func (b *budget) take() bool {
	if !b.limit {
		return true
	}
	return b.left.Add(-1) >= 0
}

// Run performs one load run and reports on it.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.PID > 0 {
		if _, err := readProcCPU(cfg.PID); err != nil {
			return nil, err
		}
	}
	st := &stats{}
	var run func(ctx context.Context, begin func() context.Context, cfg *Config, st *stats, b *budget) error
	switch cfg.Mode {
	case UDP:
		run = runUDP
	case TCP:
		run = runTCP
	}
	b := &budget{limit: cfg.Count > 0}
	b.left.Store(cfg.Count)
	var (
		cpu0    procCPU
		cpuErr  error = errors.New("bench: run never began")
		drops0  int64 = -1
		cancel        = context.CancelFunc(func() {})
		started bool
	)
	defer func() { cancel() }()
	// begin starts the run's clock, its Duration and the target's CPU and
	// drop baselines once the templates are built and the connections
	// made: building a million names' templates can take longer than the
	// run, and counting it would lower the rate of a target holding many
	// names (and charge it the CPU it spends idle meanwhile).
	begin := func() context.Context {
		started = true
		if cfg.PID > 0 {
			cpu0, cpuErr = readProcCPU(cfg.PID)
		}
		if cfg.Mode == UDP && cfg.Target.Addr().IsLoopback() {
			if d, derr := readUDPDrops(cfg.Target.Port()); derr == nil {
				drops0 = d
			}
		}
		sendCtx := ctx
		if cfg.Duration > 0 {
			sendCtx, cancel = context.WithTimeout(ctx, cfg.Duration)
		}
		st.start = time.Now()
		return sendCtx
	}
	err := run(ctx, begin, &cfg, st, b)
	if !started {
		st.start = time.Now()
	}
	if st.sendEnd.IsZero() {
		st.sendEnd = time.Now()
	}
	rep := st.report(&cfg)
	if drops0 >= 0 {
		if d, derr := readUDPDrops(cfg.Target.Port()); derr == nil {
			d -= drops0
			rep.TargetDrops = &d
		}
	}
	if cfg.PID > 0 && cpuErr == nil {
		cpu1, cerr := readProcCPU(cfg.PID)
		if cerr == nil {
			rep.addCPU(cfg.PID, cpu1.sub(cpu0))
		}
	}
	return rep, err
}
