// Package insight answers the operator's questions about search traffic:
// which names are searched for and never found, by whom, and which clients
// search the most (caSnooper's job for Channel Access). It keeps bounded
// heavy-hitter summaries (space-saving counters with a fixed number of
// slots) over two windows, the last minute and the last hour, in memory
// allocated at start.
//
// The answer paths (udpsearch, tcpsearch) call Searched once per search
// message; that only copies the client, counts and unclaimed names into a
// fixed staging buffer. A digest, off the answer path, folds the staged
// records into the summaries; queries and metrics digest first, so what
// they show is current.
//
// # Windows
//
// Each window W is kept as two periods of W/2 aligned to the clock: the
// current one and the previous one. A query covers both, so "1m" covers
// between 30 s and 60 s and "1h" between 30 min and 1 h; the answer says
// exactly since when (Report.Since), and rates are divided by that span.
//
// # Error bound
//
// In one period with N counted searches (names: unclaimed names searched;
// clients: names searched) and k slots, space-saving keeps every key whose
// true count exceeds N/k, and a kept key's count c is within err ≤ N/k
// above its true count (err is reported per entry). A key absent from a
// period has a true count of at most that period's smallest count. So over
// a window every reported count is within N/k of the true one, N being the
// window's total (Report.ErrorBound), and the ranking is exact between
// keys whose counts differ by more than that. Distinct clients per name
// are estimated by linear counting over 256 bits (within ~10 % up to a few
// hundred clients; reported as at least 1,400 beyond), and the top
// clients of a name are a 3-slot space-saving of their own: approximate.
// Both start when the name took its slot.
//
// It does not decide anything: it never drops, delays or answers a search.
package insight

import (
	"fmt"
	"hash/maphash"
	"math"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
)

// Options configure an Insight. A field's tag names the setting the daemon
// builds it from (config.FillAtStart); Names and Clients are required, and
// the other settings' zero values mean what their fields say.
type Options struct {
	// Names and Clients are the slots of each summary (per window period),
	// allocated by New, which panics without them: a summary of no slot
	// has nothing to count in.
	Names   int `setting:"insight.names"`
	Clients int
	// QueueBytes bounds the staging buffers (all shards, double
	// buffered); each buffer takes at least minStage bytes, which is all
	// a zero QueueBytes gets.
	QueueBytes int
	// DigestEvery is how soon after a search is staged it is folded in at
	// the latest; default 250 ms (sooner when a staging buffer is half
	// full). Nothing is scheduled while nothing is staged: an idle daemon
	// pays no wake-ups for insight.
	DigestEvery time.Duration
	// DigestNamesPerSecond is how many unclaimed names a second the name
	// summaries take in full; beyond it (a storm of distinct missing
	// names) they take a random sample of the search messages, each
	// weighted by the inverse of the sampling rate, so the digest's CPU
	// stays bounded whatever the search rate. 0 or negative: no limit
	// (the daemon passes insight.DefaultDigestNamesPerSecond). The client
	// summaries always count every message.
	DigestNamesPerSecond int
	// Known reports whether a name is answerable now (the registry holds
	// it): such a name is taken out of "unresolved". nil: none is.
	Known func(name string) bool
	// GUIDChangesPerHour is the beacon anomaly threshold (GUIDChanged);
	// 0 = not checked.
	GUIDChangesPerHour int
	Clock              clock.Clock
}

// Windows are the two windows kept, by their API name.
var Windows = []string{"1m", "1h"}

// Insight is safe for concurrent use.
type Insight struct {
	o      Options
	stages [shards]stage
	spare  [shards][]byte
	wake   chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup

	// The digest timer runs only while something is staged: the first
	// search staged after a digest arms it (armed), Start allows it.
	started, armed atomic.Bool
	// stageP is the answer path's sampling rate (float64 bits), set by
	// each digest from the names' arrival rate.
	stageP atomic.Uint64
	tmu    sync.Mutex // tmr and closed; never held with mu
	tmr    clock.Timer
	closed bool

	mu     sync.Mutex // the summaries and the digest
	win    [2]window
	seed   maphash.Seed
	rec    record
	aggIdx map[uint64]int32
	aggs   []agg
	// prevAgg is the agg entries of the last decoded record, in order.
	prevAgg   []int32
	samp      sampler // the digest's: records staged in full, budget 2× the option
	stageSamp sampler // all unclaimed names staged: sets stageP

	amu sync.Mutex // beacon anomalies
	an  anomalyState
}

// New allocates every summary and staging buffer. Call Start to digest in
// the background; queries digest on their own either way.
func New(o Options) *Insight {
	if o.Names <= 0 || o.Clients <= 0 {
		panic(fmt.Sprintf("insight.New: %d name and %d client slots: both summaries need slots (the daemon passes insight.names and DefaultClients)", o.Names, o.Clients))
	}
	if o.DigestEvery <= 0 {
		o.DigestEvery = 250 * time.Millisecond
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	in := &Insight{o: o, wake: make(chan struct{}, 1), done: make(chan struct{}), seed: maphash.MakeSeed(),
		aggIdx: make(map[uint64]int32)}
	in.an.init()
	// The answer path samples to the budget; the digest takes up to twice
	// it in full, which covers the estimate's lag at the start of a storm
	// (the digest then samples what was staged in full meanwhile).
	in.samp.init(2*o.DigestNamesPerSecond, o.Clock.Now().UnixNano())
	in.stageSamp.init(o.DigestNamesPerSecond, o.Clock.Now().UnixNano())
	in.stageP.Store(math.Float64bits(1))
	per := max(o.QueueBytes/(2*shards), minStage)
	for i := range in.stages {
		in.stages[i].buf = make([]byte, 0, per)
		in.stages[i].last = -1
		in.spare[i] = make([]byte, 0, per)
	}
	now := o.Clock.Now()
	for i, span := range []time.Duration{time.Minute, time.Hour} {
		w := &in.win[i]
		w.name, w.period = Windows[i], span/2
		for p := range 2 {
			w.names[p] = newNameSum(o.Names, in.seed)
			w.clients[p] = newClientSum(o.Clients)
		}
		w.idx = now.UnixNano() / int64(w.period)
		w.start[w.cur] = now.UnixNano()
		w.rate = [2]float64{1, 1}
	}
	return in
}

// Start runs the background digest until Close.
func (in *Insight) Start() {
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		for {
			select {
			case <-in.done:
				return
			case <-in.wake:
				in.Flush()
			}
		}
	}()
	in.started.Store(true)
	for i := range in.stages { // what was staged before
		s := &in.stages[i]
		s.mu.Lock()
		staged := len(s.buf) > 0
		s.mu.Unlock()
		if staged {
			in.arm()
			break
		}
	}
}

// arm schedules a digest DigestEvery from now unless one is pending. The
// answer path calls it for every search it stages; past the first after a
// digest it costs one atomic load.
func (in *Insight) arm() {
	if in.armed.Load() || !in.started.Load() || !in.armed.CompareAndSwap(false, true) {
		return
	}
	in.tmu.Lock()
	if !in.closed {
		in.tmr = in.o.Clock.AfterFunc(in.o.DigestEvery, func() {
			// Cleared before the digest swaps the buffers: a search staged
			// after the swap arms the next one.
			in.armed.Store(false)
			in.signal()
		})
	}
	in.tmu.Unlock()
}

// Close stops the background digest.
func (in *Insight) Close() {
	in.tmu.Lock()
	if in.closed {
		in.tmu.Unlock()
		return
	}
	in.closed = true
	if in.tmr != nil {
		in.tmr.Stop()
	}
	in.tmu.Unlock()
	if in.started.Load() {
		close(in.done)
		in.wg.Wait()
	}
}

// Flush folds every staged record into the summaries now.
func (in *Insight) Flush() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.flushLocked()
}

func (in *Insight) flushLocked() int64 {
	now := in.o.Clock.Now().UnixNano()
	for i := range in.win {
		in.win[i].roll(now)
	}
	var bufs [shards][]byte
	all, full := 0, 0
	for i := range in.stages {
		s := &in.stages[i]
		s.mu.Lock()
		bufs[i] = s.buf
		all, full = all+s.staged, full+s.stagedFull
		s.buf, s.signaled, s.last, s.staged, s.stagedFull = in.spare[i][:0], false, -1, 0, 0
		s.mu.Unlock()
	}
	// One sampling rate for the whole flush: every client has the same
	// chance, whichever shard its address falls in. What was staged ran
	// under the answer path's last rate; the next interval gets a new one.
	staged := in.stageRate()
	p := in.samp.rate(full, now)
	in.stageP.Store(math.Float64bits(max(in.stageSamp.rate(all, now), minStageRate)))
	if eff := staged * p; eff < 1 {
		for i := range in.win {
			w := &in.win[i]
			w.rate[w.cur] = min(w.rate[w.cur], eff)
		}
	}
	for i, b := range bufs {
		in.digest(b, now, p)
		in.spare[i] = b[:0]
	}
	return now
}

// Totals are the answer paths' counts since start.
type Totals struct {
	Found    uint64 // names answered found
	NotFound uint64 // names nobody claimed
	Dropped  uint64 // unclaimed names not summarised: staging buffer full
}

// Totals sums the staging counters.
func (in *Insight) Totals() Totals {
	var t Totals
	for i := range in.stages {
		s := &in.stages[i]
		s.mu.Lock()
		t.Found += s.found
		t.NotFound += s.missing
		t.Dropped += s.dropped
		s.mu.Unlock()
	}
	return t
}

// SampledOut returns how many unclaimed names the name summaries did not
// take because the digest was over insight.DefaultDigestNamesPerSecond.
func (in *Insight) SampledOut() uint64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.samp.out
}

// Evictions returns how many keys lost their slot to another, per summary
// kind, over both windows: a steadily growing count means more distinct
// names (or clients) than slots, and small counts are then less exact.
func (in *Insight) Evictions() (names, clients uint64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i := range in.win {
		for p := range 2 {
			names += in.win[i].names[p].c.evict
			clients += in.win[i].clients[p].c.evict
		}
	}
	return names, clients
}

// window is one window's two periods.
type window struct {
	name    string
	period  time.Duration
	idx     int64 // period number of cur
	cur     int   // index of the current period; the previous is 1-cur
	start   [2]int64
	rate    [2]float64 // lowest name sampling rate in the period (1: every search counted)
	names   [2]nameSum
	clients [2]clientSum
}

// roll starts a new period when the clock has moved into one.
func (w *window) roll(now int64) {
	p := now / int64(w.period)
	switch {
	case p == w.idx:
		return
	case p == w.idx+1:
		w.cur = 1 - w.cur
	default: // idle for more than a period: both are stale
		prev := 1 - w.cur
		w.names[prev].reset()
		w.clients[prev].reset()
		w.start[prev], w.rate[prev] = 0, 1
	}
	w.idx = p
	w.names[w.cur].reset()
	w.clients[w.cur].reset()
	w.start[w.cur], w.rate[w.cur] = p*int64(w.period), 1
}

// sampleRate is the lowest name sampling rate over the window's data.
func (w *window) sampleRate() float64 {
	r := w.rate[w.cur]
	if w.start[1-w.cur] != 0 {
		r = min(r, w.rate[1-w.cur])
	}
	return r
}

// since is where the window's data starts.
func (w *window) since() int64 {
	if s := w.start[1-w.cur]; s != 0 {
		return s
	}
	return w.start[w.cur]
}

func (in *Insight) window(name string) *window {
	for i := range in.win {
		if in.win[i].name == name {
			return &in.win[i]
		}
	}
	return nil
}

// Report is a window's answer.
type Report struct {
	Window string    `json:"window"`
	Since  time.Time `json:"since"` // the data covers Since..At
	At     time.Time `json:"at"`
	// Counted is N, the weight counted in the window (names: unclaimed
	// names searched; clients: names searched); Slots is k per period.
	Counted uint64 `json:"counted"`
	Slots   int    `json:"slots"`
	// ErrorBound is the most any count below is off by (N/k per period,
	// summed over the window's two periods).
	ErrorBound uint64 `json:"error_bound"`
	// SampleRate is the lowest share of search messages whose names were
	// counted in the window (1: all; below 1 only in a storm beyond
	// insight.DefaultDigestNamesPerSecond). Below 1, name counts (and N) are
	// estimates scaled by 1/rate, each with a standard error of about
	// sqrt(count·(1−rate)/rate) beside ErrorBound. Client figures are
	// always exact counts.
	SampleRate float64 `json:"sample_rate"`
}

// Unresolved is one name searched for and not found.
type Unresolved struct {
	Name      string  `json:"name"`
	Searches  uint64  `json:"searches"`
	MaxError  uint64  `json:"max_error"` // Searches is within this of the true count
	PerSecond float64 `json:"per_second"`
	// Clients is the estimated number of distinct clients; ClientsAtLeast
	// says the estimate saturated and the true number is higher.
	Clients        int         `json:"clients"`
	ClientsAtLeast bool        `json:"clients_at_least,omitempty"`
	FirstSeen      time.Time   `json:"first_seen"`
	LastSeen       time.Time   `json:"last_seen"`
	TopClients     []TopClient `json:"top_clients"`
}

// TopClient is one of a name's busiest searchers (approximate).
type TopClient struct {
	Addr     string `json:"addr"`
	Searches uint64 `json:"searches"`
}

// UnresolvedReport is GET /v1/insight/unresolved's answer.
type UnresolvedReport struct {
	Report
	Names []Unresolved `json:"names"`
}

// Client is one searching client.
type Client struct {
	Addr              string    `json:"addr"`
	Names             uint64    `json:"names"` // names searched
	MaxError          uint64    `json:"max_error"`
	NamesPerSecond    float64   `json:"names_per_second"`
	Searches          uint64    `json:"searches"` // search messages
	SearchesPerSecond float64   `json:"searches_per_second"`
	NotFound          uint64    `json:"not_found"`       // of those names, nobody claimed
	NotFoundShare     float64   `json:"not_found_share"` // NotFound / names, 0..1
	NotFoundPerSecond float64   `json:"not_found_per_second"`
	Transport         string    `json:"transport"` // udp, tcp or udp+tcp
	FirstSeen         time.Time `json:"first_seen"`
	LastSeen          time.Time `json:"last_seen"`
}

// ClientsReport is GET /v1/insight/clients's answer.
type ClientsReport struct {
	Report
	Clients []Client `json:"clients"`
}

func (in *Insight) report(w *window, now int64, n uint64, k int, minPrev, errNow uint64) Report {
	return Report{Window: w.name, Since: time.Unix(0, w.since()).UTC(), At: time.Unix(0, now).UTC(),
		Counted: n, Slots: k, ErrorBound: errNow + minPrev, SampleRate: w.sampleRate()}
}

func seconds(w *window, now int64) float64 {
	return math.Max(float64(now-w.since())/1e9, 1)
}

// Unresolved returns the window's most searched names nobody serves,
// most searched first, at most limit (≤ 0: all kept). ok is false for an
// unknown window.
func (in *Insight) Unresolved(window string, limit int) (UnresolvedReport, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	w := in.window(window)
	if w == nil {
		return UnresolvedReport{}, false
	}
	now := in.flushLocked()
	out := in.mergeNames(w, now)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Searches != out[j].Searches {
			return out[i].Searches > out[j].Searches
		}
		return out[i].Name < out[j].Name
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	cur, prev := &w.names[w.cur], &w.names[1-w.cur]
	r := UnresolvedReport{Report: in.report(w, now, cur.c.total+prev.c.total, in.o.Names,
		boundOf(&prev.c, in.o.Names), boundOf(&cur.c, in.o.Names)), Names: out}
	if r.Names == nil {
		r.Names = []Unresolved{}
	}
	return r, true
}

// boundOf is N/k rounded up: the most a count in that period is off by.
func boundOf(c *counts, k int) uint64 { return (c.total + uint64(k) - 1) / uint64(k) }

// mergeNames combines the window's two periods, dropping (and freeing the
// slots of) names that have since become answerable.
func (in *Insight) mergeNames(w *window, now int64) []Unresolved {
	cur, prev := &w.names[w.cur], &w.names[1-w.cur]
	secs := seconds(w, now)
	out := make([]Unresolved, 0, len(cur.idx)+len(prev.idx))
	known := in.o.Known
	emit := func(a, b *nameSum, ia, ib int32) {
		name := string(a.keys[ia])
		if known != nil && known(name) {
			a.remove(ia)
			if ib >= 0 {
				b.remove(ib)
			}
			return
		}
		out = append(out, mergeName(name, a, b, ia, ib, secs))
	}
	// other is the slot of a's slot i's name in b, or -1.
	other := func(a, b *nameSum, i int32) int32 {
		if j, ok := b.idx[a.hash[i]]; ok && string(b.keys[j]) == string(a.keys[i]) {
			return j
		}
		return -1
	}
	for _, i := range cur.idx {
		emit(cur, prev, i, other(cur, prev, i))
	}
	for _, j := range prev.idx {
		if other(prev, cur, j) < 0 {
			emit(prev, cur, j, -1)
		}
	}
	return out
}

// Name returns the last hour's figures for one name that nobody serves;
// ok is false if it was not searched (or not kept).
func (in *Insight) Name(name string) (Unresolved, Report, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	w := &in.win[1]
	now := in.flushLocked()
	cur, prev := &w.names[w.cur], &w.names[1-w.cur]
	rep := in.report(w, now, cur.c.total+prev.c.total, in.o.Names, boundOf(&prev.c, in.o.Names), boundOf(&cur.c, in.o.Names))
	i, inCur := cur.slot(name)
	j, inPrev := prev.slot(name)
	secs := seconds(w, now)
	switch {
	case inCur:
		if !inPrev {
			j = -1
		}
		return mergeName(name, cur, prev, i, j, secs), rep, true
	case inPrev:
		return mergeName(name, prev, cur, j, -1, secs), rep, true
	}
	return Unresolved{}, rep, false
}

// mergeName combines a name's figures from the period a (where it is kept,
// slot ia) and the other period b (slot ib, or -1 if not kept there).
func mergeName(name string, a, b *nameSum, ia, ib int32, secs float64) Unresolved {
	u := Unresolved{Name: name, Searches: a.c.count[ia], MaxError: a.c.err[ia]}
	fa := &a.info[ia]
	first, last, bits := fa.first, fa.last, fa.clients
	tops := make([]topClient, 0, 2*topN)
	tops = append(tops, fa.top[:]...)
	if ib >= 0 {
		fb := &b.info[ib]
		u.Searches += b.c.count[ib]
		u.MaxError += b.c.err[ib]
		first, last = min(first, fb.first), max(last, fb.last)
		for i := range bits {
			bits[i] |= fb.clients[i]
		}
		tops = append(tops, fb.top[:]...)
	} else if b.full() {
		u.MaxError += b.c.min() // it may have been counted there and evicted
	}
	u.PerSecond = float64(u.Searches) / secs
	u.Clients, u.ClientsAtLeast = distinct(bits)
	u.FirstSeen, u.LastSeen = time.Unix(0, first).UTC(), time.Unix(0, last).UTC()
	var named int
	u.TopClients, named = topOf(tops)
	// Two clients share a bitmap bit 1 time in 256: the top lists name
	// clients exactly, so the estimate is never below what they show.
	u.Clients = max(u.Clients, named)
	return u
}

// Clients returns the window's busiest clients by names searched, at most
// limit (≤ 0: all kept).
func (in *Insight) Clients(window string, limit int) (ClientsReport, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	w := in.window(window)
	if w == nil {
		return ClientsReport{}, false
	}
	now := in.flushLocked()
	out := in.mergeClients(w, now)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Names != out[j].Names {
			return out[i].Names > out[j].Names
		}
		return out[i].Addr < out[j].Addr
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	cur, prev := &w.clients[w.cur], &w.clients[1-w.cur]
	r := ClientsReport{Report: in.report(w, now, cur.c.total+prev.c.total, in.o.Clients,
		boundOf(&prev.c, in.o.Clients), boundOf(&cur.c, in.o.Clients)), Clients: out}
	if r.Clients == nil {
		r.Clients = []Client{}
	}
	return r, true
}

func (in *Insight) mergeClients(w *window, now int64) []Client {
	cur, prev := &w.clients[w.cur], &w.clients[1-w.cur]
	secs := seconds(w, now)
	out := make([]Client, 0, len(cur.idx)+len(prev.idx))
	emit := func(a netip.Addr, x, y *clientSum, ix, iy int32) {
		c := Client{Addr: a.String(), Names: x.c.count[ix], MaxError: x.c.err[ix]}
		f := x.info[ix]
		if iy >= 0 {
			g := &y.info[iy]
			c.Names += y.c.count[iy]
			c.MaxError += y.c.err[iy]
			f.first, f.last = min(f.first, g.first), max(f.last, g.last)
			f.searches += g.searches
			f.names += g.names
			f.missing += g.missing
			f.tcp += g.tcp
			f.udp += g.udp
		} else if y.full() {
			c.MaxError += y.c.min()
		}
		c.Searches, c.NotFound = f.searches, f.missing
		if f.names > 0 {
			c.NotFoundShare = float64(f.missing) / float64(f.names)
		}
		c.NamesPerSecond = float64(c.Names) / secs
		c.SearchesPerSecond = float64(c.Searches) / secs
		c.NotFoundPerSecond = float64(c.NotFound) / secs
		switch {
		case f.tcp > 0 && f.udp > 0:
			c.Transport = "udp+tcp"
		case f.tcp > 0:
			c.Transport = "tcp"
		default:
			c.Transport = "udp"
		}
		c.FirstSeen, c.LastSeen = time.Unix(0, f.first).UTC(), time.Unix(0, f.last).UTC()
		out = append(out, c)
	}
	for a, i := range cur.idx {
		j, ok := prev.idx[a]
		if !ok {
			j = -1
		}
		emit(a, cur, prev, i, j)
	}
	for a, j := range prev.idx {
		if _, ok := cur.idx[a]; !ok {
			emit(a, prev, cur, j, -1)
		}
	}
	return out
}

// Gauges are the figures the metrics read for one window.
type Gauges struct {
	UnresolvedNames     int     // distinct unresolved names kept (≤ 2 × Names slots)
	TopNamesPerSecond   float64 // busiest client's names searched per second
	TopMissingPerSecond float64 // highest not-found names per second of any client
}

// Gauges computes the metrics' figures for window.
func (in *Insight) Gauges(window string) Gauges {
	in.mu.Lock()
	defer in.mu.Unlock()
	w := in.window(window)
	if w == nil {
		return Gauges{}
	}
	now := in.flushLocked()
	g := Gauges{UnresolvedNames: len(in.mergeNames(w, now))}
	for _, c := range in.mergeClients(w, now) {
		g.TopNamesPerSecond = max(g.TopNamesPerSecond, c.NamesPerSecond)
		g.TopMissingPerSecond = max(g.TopMissingPerSecond, c.NotFoundPerSecond)
	}
	return g
}
