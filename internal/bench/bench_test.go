package bench

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/sim"
)

func startSite(t *testing.T, servers, names int) *sim.Site {
	t.Helper()
	s, err := sim.Start(context.Background(), sim.Options{Servers: servers, NamesPerServer: names, NameLen: 24})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func checkSane(t *testing.T, r *Report) {
	t.Helper()
	t.Logf("\n%s", r)
	if r.Messages == 0 || r.Claims == 0 || r.ClaimsPerSec <= 0 || r.MessagesPerSec <= 0 {
		t.Fatalf("no traffic: %+v", r)
	}
	l := r.Latency
	if l.Samples == 0 || l.P50us <= 0 || l.P50us > l.P99us || l.P99us > l.MaxUs || l.MaxUs > 5e6 {
		t.Fatalf("latency not sane: %+v", l)
	}
}

func TestUDPMustReplyAgainstSite(t *testing.T) {
	s := startSite(t, 2, 200)
	r, err := Run(context.Background(), Config{
		Mode: UDP, Target: s.UDPAddr(), Hits: s.AllNames(), HitFraction: 0.5,
		MustReply: true, Count: 300, Window: 8, Duration: 10 * time.Second, PID: os.Getpid(),
	})
	if err != nil {
		t.Fatal(err)
	}
	checkSane(t, r)
	if r.Messages != 300 || r.Timeouts != 0 {
		t.Fatalf("sent %d (want 300), %d unanswered", r.Messages, r.Timeouts)
	}
	// Each hit is claimed by exactly one server; MustReply: both answer.
	if r.Claims != r.Hits || r.Replies != 2*r.Messages {
		t.Fatalf("claims %d hits %d replies %d", r.Claims, r.Hits, r.Replies)
	}
	if r.Hits*10 < r.Names*4 || r.Hits*10 > r.Names*6 {
		t.Fatalf("hit fraction: %d of %d", r.Hits, r.Names)
	}
	if r.CPU == nil || r.CPU.Seconds < 0 {
		t.Fatalf("no CPU report: %+v", r.CPU)
	}
}

func TestUDPMissesTimeOutWithoutMustReply(t *testing.T) {
	s := startSite(t, 1, 50)
	r, err := Run(context.Background(), Config{
		Mode: UDP, Target: s.Server(0).UDP, HitFraction: 0, NamesPerMsg: 5,
		Count: 20, Window: 20, Timeout: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Replies != 0 || r.Claims != 0 || r.Timeouts != 20 {
		t.Fatalf("all-miss run: %+v", r)
	}
}

func TestTCPPipelinedAgainstServer(t *testing.T) {
	s := startSite(t, 2, 300)
	srv := s.Server(1)
	r, err := Run(context.Background(), Config{
		Mode: TCP, Target: srv.TCP, Hits: srv.Names, HitFraction: 1, NamesPerMsg: 10,
		Conns: 3, Window: 16, Count: 600, Duration: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkSane(t, r)
	if r.Messages != 600 || r.Claims != r.Hits || r.Hits != 6000 || r.Timeouts != 0 {
		t.Fatalf("tcp run: %+v", r)
	}
	b, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(b), `"claims_per_sec"`) {
		t.Fatalf("json: %s %v", b, err)
	}
}

func TestDurationBound(t *testing.T) {
	s := startSite(t, 1, 20)
	start := time.Now()
	r, err := Run(context.Background(), Config{
		Mode: TCP, Target: s.Server(0).TCP, Hits: s.AllNames(), HitFraction: 1,
		Duration: 200 * time.Millisecond, Rate: 500,
	})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("run took %v", el)
	}
	// Paced at 500/s for 0.2 s: about 100 messages, certainly not thousands.
	if r.Messages < 20 || r.Messages > 150 {
		t.Fatalf("paced run sent %d messages in %.3f s", r.Messages, r.Seconds)
	}
}

// The thread run times of this very process: exact (not in 10 ms steps)
// and growing with the work done.
func TestReadSchedstat(t *testing.T) {
	a, err := readSchedstat(os.Getpid())
	if err != nil {
		t.Skipf("no schedstat: %v", err)
	}
	x := 0
	for i := range 20_000_000 {
		x += i ^ x
	}
	b, _ := readSchedstat(os.Getpid())
	if d := b.sub(a).ns; d <= 0 || d%10_000_000 == 0 {
		t.Fatalf("run time moved by %d ns (x=%d)", d, x)
	}
}

func TestParseProcStat(t *testing.T) {
	line := "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 75 0 0 20 0 1 0 100 0 0"
	c, err := parseProcStat(line)
	if err != nil || c.ns != 3_250_000_000 {
		t.Fatalf("got %+v %v, want 325 ticks = 3.25 s", c, err)
	}
	if _, err := parseProcStat("garbage"); err == nil {
		t.Fatal("garbage accepted")
	}
}

func TestNameStreamFraction(t *testing.T) {
	c := Config{Mode: UDP, Target: startSite(t, 1, 1).UDPAddr(), Hits: []string{"a", "b", "c"}, HitFraction: 0.25, Distinct: 100}
	if err := c.defaults(); err != nil {
		t.Fatal(err)
	}
	names, hit := nameStream(&c)
	n := 0
	for i, h := range hit {
		if h {
			n++
			if s := string(names[i].Name); s != "a" && s != "b" && s != "c" {
				t.Fatalf("hit %q", s)
			}
		} else if !strings.HasPrefix(string(names[i].Name), "bench:miss:") || len(names[i].Name) < c.MissLen {
			t.Fatalf("miss %q", names[i].Name)
		}
	}
	if n != 25 {
		t.Fatalf("%d hits of 100, want 25", n)
	}
}

func TestParseUDPDrops(t *testing.T) {
	table := `   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
 9772: 0100007F:13D4 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 216228 2 00000000ba252bd3 7
 9773: 00000000:13D4 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 216229 2 00000000ba252bd4 5
11963: 00000000:9C20 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 216218 2 000000002ecb1c2c 100
`
	if got := parseUDPDrops(table, 5076); got != 12 {
		t.Fatalf("port 5076 drops: got %d, want 12", got)
	}
	if got := parseUDPDrops(table, 5075); got != 0 {
		t.Fatalf("port 5075 drops: got %d, want 0", got)
	}
}

func TestUDPDropsReported(t *testing.T) {
	// A bare socket with a tiny receive buffer stands in for a target that
	// never reads: every datagram past the buffer is a kernel drop.
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	_ = uc.SetReadBuffer(1)
	r, err := Run(context.Background(), Config{
		Mode: UDP, Target: uc.LocalAddr().(*net.UDPAddr).AddrPort(),
		Count: 200, Window: 200, Timeout: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.TargetDrops == nil || *r.TargetDrops < 100 || *r.TargetDrops > r.Messages {
		t.Fatalf("sent %d to a socket that never reads; drops %v", r.Messages, r.TargetDrops)
	}
}

// TestDurationAfterSetup: the run's Duration (and its clock) starts once
// the connections are made and the templates built, so a slow setup (a
// million names to pack, a server slow to validate) does not eat the run.
// The proxy holds each connection's handshake back longer than the whole
// Duration: were the clock started before setup, nothing would be sent.
func TestDurationAfterSetup(t *testing.T) {
	s := startSite(t, 1, 20)
	const hold = time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				time.Sleep(hold)
				up, err := net.Dial("tcp", s.Server(0).TCP.String())
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c) }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	r, err := Run(context.Background(), Config{
		Mode: TCP, Target: netip.MustParseAddrPort(ln.Addr().String()), Hits: s.AllNames(), HitFraction: 1,
		Duration: hold / 5, Window: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Messages == 0 || r.Claims == 0 {
		t.Fatalf("nothing sent or claimed after a %v setup in a %v run: %+v", hold, hold/5, r)
	}
	if r.Seconds >= hold.Seconds() {
		t.Fatalf("the run's %.3f s include the setup", r.Seconds)
	}
}
