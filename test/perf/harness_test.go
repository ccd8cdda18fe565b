package perf

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/test/harness"
)

// requirePerf skips the test unless PVANS_PERF=1.
func requirePerf(t *testing.T) {
	t.Helper()
	if os.Getenv("PVANS_PERF") != "1" {
		t.Skip("performance harness: set PVANS_PERF=1 to run")
	}
}

// envInt reads a positive integer setting, or def.
func envInt(t *testing.T, key string, def int) int {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", key, v)
	}
	return n
}

func envDur(t *testing.T, key string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		t.Fatalf("%s=%q: want a duration", key, v)
	}
	return d
}

// pvans is one daemon process under test (test/harness), with the
// figures this package reads from it.
type pvans struct {
	*harness.Pvans
	t       *testing.T
	Started time.Time // just before exec
}

// startPVANS runs the daemon on loopback with fresh ports, no snapshot,
// rate limits off (the load tool is one source), plus extra flags. With
// PERF_SERVER_CPU set, it is pinned to that CPU with taskset, in a
// session of its own.
func startPVANS(t *testing.T, extra ...string) *pvans {
	t.Helper()
	return startPVANSOn(t, 0, extra...)
}

// startPVANSOn is startPVANS with a given search/beacon port (0: a free
// one), so a restarted daemon hears the same beacons.
func startPVANSOn(t *testing.T, udp uint16, extra ...string) *pvans {
	t.Helper()
	return startPVANSBin(t, "", udp, extra...)
}

// startPVANSBin is startPVANSOn with a given binary ("": the default).
func startPVANSBin(t *testing.T, bin string, udp uint16, extra ...string) *pvans {
	t.Helper()
	if udp == 0 {
		udp = harness.FreePort(t)
	}
	args := []string{"--beacon-addr-list", "127.0.0.1",
		"--rate-limit-udp-searches-per-second", "0", "--rate-limit-udp-names-per-second", "0",
		"--rate-limit-tcp-messages-per-second", "0",
		// The load tool is one client socket that reads as fast as it
		// can: its replies are not paced.
		"--udp-client-reply-names-per-second", "0",
		// Every simulated server beacons from 127.0.0.1: one sender.
		"--rate-limit-beacons-per-second", "0",
		"--log-level", "warn",
	}
	if !slices.Contains(extra, "-addr-list") && !slices.Contains(extra, "--addr-list") {
		// Discovery pings go to our own port only (nothing answers there).
		args = append(args, "--addr-list", fmt.Sprintf("127.0.0.1:%d", udp))
	}
	o := harness.Options{UDPPort: udp, Args: append(args, extra...), Bin: bin}
	if cpu := os.Getenv("PERF_SERVER_CPU"); cpu != "" {
		// setsid: with the kernel's autogroups (sched_autogroup_enabled)
		// a session's tasks share one CPU weight, split between the CPUs
		// in proportion to their load; in the test's session pvans would
		// get the part of a weight the busy load tool leaves on its CPU,
		// while a comparison server started in a session of its own gets
		// a whole one. setsid does not fork here (the child leads no
		// process group), so the PID stays pvans's.
		o.Command = []string{"setsid", "taskset", "-c", cpu}
	}
	p := &pvans{t: t, Started: time.Now()}
	p.Pvans = harness.Start(t, o)
	return p
}

// PID is the daemon's process ID (taskset execs it, so the same).
func (p *pvans) PID() int { return p.Pid() }

func (p *pvans) logTail() string {
	out := p.Output()
	if len(out) > 4000 {
		out = out[len(out)-4000:]
	}
	return out
}

// Metric is one scraped value, 0 if absent (fatal if /metrics fails).
func (p *pvans) Metric(name string) float64 {
	p.t.Helper()
	return max(p.Pvans.Metric(p.t, name), 0)
}

// waitMetric polls name every poll until cond holds or timeout passes; it
// returns the time cond first held, measured from the poll that saw it.
func (p *pvans) waitMetric(name string, cond func(float64) bool, poll, timeout time.Duration) (time.Time, bool) {
	return p.WaitMetric(name, cond, poll, timeout)
}

// rssBytes reads VmRSS of pid.
func rssBytes(pid int) float64 { return float64(harness.RSS(pid)) }

// loadAvg is the 1-minute load average, for the record.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// summary is the percentiles of a set of durations.
type summary struct {
	N                  int
	Min, P50, P99, Max time.Duration
}

func summarize(d []time.Duration) summary {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return summary{}
	}
	pct := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return summary{N: len(s), Min: s[0], P50: pct(0.5), P99: pct(0.99), Max: s[len(s)-1]}
}

func (s summary) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return fmt.Sprintf("n=%d min %v p50 %v p99 %v max %v", s.N, r(s.Min), r(s.P50), r(s.P99), r(s.Max))
}

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

// ctxTimeout is a bounded context for one step.
func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// udpDrops lists the kernel drop count of each UDP socket pid holds, as
// "local-address:port=drops" (from /proc/net/udp): a burst that overflows
// a receive buffer shows here even if the process does not count it.
func udpDrops(pid int) string {
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return "?"
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name())
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return "?"
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 13 || !inodes[f[9]] {
			continue
		}
		port, _ := strconv.ParseUint(f[1][strings.IndexByte(f[1], ':')+1:], 16, 16)
		out = append(out, fmt.Sprintf("port %d: %s drops", port, f[len(f)-1]))
	}
	return strings.Join(out, ", ")
}
