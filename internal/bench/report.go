package bench

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report is the result of a run; its JSON form is what `pvans-bench -json`
// prints. Rates are over the send phase (Seconds); replies arriving in the
// final drain are counted too.
type Report struct {
	Mode        Mode    `json:"mode"`
	Target      string  `json:"target"`
	MustReply   bool    `json:"must_reply"`
	HitFraction float64 `json:"hit_fraction"`
	Conns       int     `json:"conns"`
	Window      int     `json:"window"`
	Seconds     float64 `json:"seconds"`

	Messages int64 `json:"messages"` // datagrams (UDP) or search messages (TCP) sent
	Names    int64 `json:"names"`    // names searched
	Hits     int64 `json:"hits"`     // names searched that the target should claim
	Replies  int64 `json:"replies"`  // CMD_SEARCH_RESPONSE received
	Claims   int64 `json:"claims"`   // CIDs claimed in those replies
	Timeouts int64 `json:"timeouts"` // messages never answered within Timeout

	MessagesPerSec float64 `json:"messages_per_sec"`
	NamesPerSec    float64 `json:"names_per_sec"`
	ClaimsPerSec   float64 `json:"claims_per_sec"`

	Latency Latency `json:"latency"`
	CPU     *CPU    `json:"cpu,omitempty"`
	// TargetDrops is the datagrams the kernel dropped at the target's UDP
	// port during the run (loopback UDP targets only; every socket bound
	// to the port, so forwarded copies count too).
	TargetDrops *int64 `json:"target_drops,omitempty"`
}

// Latency is the time from sending a message to its first reply.
type Latency struct {
	Samples int     `json:"samples"`
	P50us   float64 `json:"p50_us"`
	P90us   float64 `json:"p90_us"`
	P99us   float64 `json:"p99_us"`
	MaxUs   float64 `json:"max_us"`
}

// CPU is the target's CPU time over the run, from /proc/<pid>/stat.
type CPU struct {
	PID          int     `json:"pid"`
	Seconds      float64 `json:"seconds"`        // utime+stime delta
	Utilization  float64 `json:"utilization"`    // Seconds / run seconds (1 = one core)
	PerMessageUs float64 `json:"per_message_us"` // per datagram / per TCP message
	PerNameUs    float64 `json:"per_name_us"`
}

func (s *stats) report(c *Config) *Report {
	secs := s.sendEnd.Sub(s.start).Seconds()
	r := &Report{
		Mode: c.Mode, Target: c.Target.String(), MustReply: c.MustReply, HitFraction: c.HitFraction,
		Conns: c.Conns, Window: c.Window, Seconds: secs,
		Messages: s.messages.Load(), Names: s.names.Load(), Hits: s.hits.Load(),
		Replies: s.replies.Load(), Claims: s.claims.Load(), Timeouts: s.timeouts.Load(),
	}
	if secs > 0 {
		r.MessagesPerSec = float64(r.Messages) / secs
		r.NamesPerSec = float64(r.Names) / secs
		r.ClaimsPerSec = float64(r.Claims) / secs
	}
	s.mu.Lock()
	lat := slices.Clone(s.lat)
	s.mu.Unlock()
	slices.Sort(lat)
	r.Latency.Samples = len(lat)
	if len(lat) > 0 {
		r.Latency.P50us = us(percentile(lat, 0.50))
		r.Latency.P90us = us(percentile(lat, 0.90))
		r.Latency.P99us = us(percentile(lat, 0.99))
		r.Latency.MaxUs = us(lat[len(lat)-1])
	}
	return r
}

// percentile of sorted samples, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func (r *Report) addCPU(pid int, d procCPU) {
	c := &CPU{PID: pid, Seconds: d.seconds()}
	if r.Seconds > 0 {
		c.Utilization = c.Seconds / r.Seconds
	}
	if r.Messages > 0 {
		c.PerMessageUs = c.Seconds * 1e6 / float64(r.Messages)
	}
	if r.Names > 0 {
		c.PerNameUs = c.Seconds * 1e6 / float64(r.Names)
	}
	r.CPU = c
}

// String is the human-readable report.
func (r *Report) String() string {
	var b strings.Builder
	unit := "datagrams"
	if r.Mode == TCP {
		unit = "messages"
	}
	fmt.Fprintf(&b, "target %s over %s: %d conn(s), window %d, must-reply %v, hit fraction %.2f\n",
		r.Target, r.Mode, r.Conns, r.Window, r.MustReply, r.HitFraction)
	fmt.Fprintf(&b, "sent     %d %s, %d names (%d hits) in %.2f s\n", r.Messages, unit, r.Names, r.Hits, r.Seconds)
	fmt.Fprintf(&b, "rate     %.0f %s/s, %.0f names/s\n", r.MessagesPerSec, unit, r.NamesPerSec)
	fmt.Fprintf(&b, "replies  %d, claims %d (%.0f claims/s), unanswered %d\n", r.Replies, r.Claims, r.ClaimsPerSec, r.Timeouts)
	if r.Latency.Samples > 0 {
		fmt.Fprintf(&b, "latency  p50 %.0f µs, p90 %.0f µs, p99 %.0f µs, max %.0f µs (%d samples)\n",
			r.Latency.P50us, r.Latency.P90us, r.Latency.P99us, r.Latency.MaxUs, r.Latency.Samples)
	} else {
		b.WriteString("latency  no replies\n")
	}
	if r.TargetDrops != nil {
		fmt.Fprintf(&b, "drops    %d datagrams dropped by the kernel at the target's port\n", *r.TargetDrops)
	}
	if r.CPU != nil {
		fmt.Fprintf(&b, "target   pid %d: %.2f CPU s (%.0f%% of a core), %.1f µs per %s, %.2f µs per name\n",
			r.CPU.PID, r.CPU.Seconds, 100*r.CPU.Utilization, r.CPU.PerMessageUs, strings.TrimSuffix(unit, "s"), r.CPU.PerNameUs)
	}
	return b.String()
}

// procCPU is the CPU time of a process in nanoseconds.
type procCPU struct{ ns int64 }

// clockTicks is USER_HZ, 100 on every Linux ABI Go supports.
const clockTicks = 100

func (p procCPU) sub(q procCPU) procCPU { return procCPU{p.ns - q.ns} }
func (p procCPU) seconds() float64      { return float64(p.ns) / 1e9 }

// readProcCPU is the run time of every thread of pid from
// /proc/<pid>/task/*/schedstat (nanoseconds, exact: the scheduler's own
// sum), else utime and stime of /proc/<pid>/stat (10 ms ticks, sampled at
// the timer tick: too coarse for a target using a few % of a core). A
// thread that exits between two reads takes its time with it; the
// daemons measured here keep their threads.
func readProcCPU(pid int) (procCPU, error) {
	if c, err := readSchedstat(pid); err == nil {
		return c, nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procCPU{}, fmt.Errorf("bench: target CPU: %w", err)
	}
	return parseProcStat(string(b))
}

func parseProcStat(s string) (procCPU, error) {
	// The command name (field 2) may contain spaces and parentheses: fields
	// are counted from the last ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procCPU{}, fmt.Errorf("bench: malformed /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return procCPU{}, fmt.Errorf("bench: short /proc stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return procCPU{}, fmt.Errorf("bench: malformed /proc stat times")
	}
	return procCPU{(u + st) * (1e9 / clockTicks)}, nil
}

func readSchedstat(pid int) (procCPU, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return procCPU{}, err
	}
	var total int64
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return procCPU{}, fmt.Errorf("bench: malformed schedstat")
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return procCPU{}, err
		}
		total += ns
	}
	return procCPU{total}, nil
}

// readUDPDrops sums the drops column of /proc/net/udp and /proc/net/udp6
// over every socket bound to port.
func readUDPDrops(port uint16) (int64, error) {
	var total int64
	found := false
	for _, f := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		found = true
		total += parseUDPDrops(string(b), port)
	}
	if !found {
		return 0, fmt.Errorf("bench: no /proc/net/udp")
	}
	return total, nil
}

// parseUDPDrops reads one /proc/net/udp table: local_address is
// HEXADDR:HEXPORT (field 2), drops is the last field.
func parseUDPDrops(table string, port uint16) int64 {
	var total int64
	want := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 13 || !strings.HasSuffix(f[1], want) {
			continue
		}
		if n, err := strconv.ParseInt(f[len(f)-1], 10, 64); err == nil {
			total += n
		}
	}
	return total
}
