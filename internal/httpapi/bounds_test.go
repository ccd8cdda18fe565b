package httpapi

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/registry"
)

// TestDiscoverRateLimited is the issue-14 row "5,000 POST /v1/discover in
// 2.5 s": one discovery round per interval, the rest answered 429 with
// Retry-After.
func TestDiscoverRateLimited(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	rounds := 0
	h := Handler(Options{Registry: &fakeReg{}, Discover: func() error { rounds++; return nil },
		Clock: clk, Limits: Limits{DiscoverInterval: 10 * time.Second}})
	codes := map[int]int{}
	for i := 0; i < 5000; i++ {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "http://127.0.0.1/v1/discover", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		codes[rec.Code]++
		if ra := rec.Header().Get("Retry-After"); rec.Code == 429 && (ra < "1" || ra > "9" && ra != "10") {
			t.Fatalf("429 with Retry-After %q; want 1..10 s", ra)
		}
		clk.Advance(500 * time.Microsecond) // 5000 in 2.5 s
	}
	if rounds != 1 || codes[202] != 1 || codes[429] != 4999 {
		t.Fatalf("%d discovery rounds, answers %v; want 1 round, 4999 × 429", rounds, codes)
	}
	clk.Advance(10 * time.Second)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "http://127.0.0.1/v1/discover", nil)
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	if rec.Code != 202 || rounds != 2 {
		t.Fatalf("after the interval: %d, %d rounds", rec.Code, rounds)
	}
}

// TestDiscoverNotASimpleRequest: a web page can make a browser send a
// "simple" cross-site POST (form or text/plain content, no custom header)
// without asking; POST /v1/discover requires a JSON content type, which
// needs a CORS preflight pvans never grants.
func TestDiscoverNotASimpleRequest(t *testing.T) {
	rounds := 0
	h := Handler(Options{Registry: &fakeReg{}, Discover: func() error { rounds++; return nil }})
	for _, tc := range []struct {
		ctype, site string
		want        int
	}{
		{"", "", 415},
		{"text/plain", "", 415},
		{"application/x-www-form-urlencoded", "", 415},
		{"multipart/form-data; boundary=x", "", 415},
		{"application/json", "cross-site", 403},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "http://127.0.0.1/v1/discover", strings.NewReader("{}"))
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		if tc.site != "" {
			req.Header.Set("Sec-Fetch-Site", tc.site)
		}
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("Content-Type %q Sec-Fetch-Site %q: %d, want %d", tc.ctype, tc.site, rec.Code, tc.want)
		}
	}
	if rounds != 0 {
		t.Fatalf("%d discovery rounds from refused requests", rounds)
	}
	// A body is bounded.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "http://127.0.0.1/v1/discover", strings.NewReader(strings.Repeat(" ", MaxBodyBytes+1)))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	if rec.Code != 413 || rounds != 0 {
		t.Fatalf("oversized body: %d, %d rounds", rec.Code, rounds)
	}
}

// TestMatchPatternBounded is the issue-14 row "GET /v1/names?match= with a
// 1 MB glob": a long or wildcard-heavy pattern is refused before any
// registry work.
func TestMatchPatternBounded(t *testing.T) {
	reg := &countingReg{}
	h := Handler(Options{Registry: reg})
	for _, m := range []string{strings.Repeat("a", MaxMatchBytes+1), strings.Repeat("*a", MaxMatchWildcards+1), strings.Repeat("*", 1<<20)} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/v1/names?match="+m, nil))
		if rec.Code != 400 {
			t.Errorf("pattern of %d bytes: %d, want 400", len(m), rec.Code)
		}
	}
	if reg.calls.Load() != 0 {
		t.Fatalf("registry listed %d times for refused patterns", reg.calls.Load())
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/v1/names?match="+strings.Repeat("*a", MaxMatchWildcards/2), nil))
	if rec.Code != 200 || reg.calls.Load() != 1 {
		t.Fatalf("pattern within bounds: %d", rec.Code)
	}
}

type countingReg struct {
	fakeReg
	calls atomic.Int64
}

func (c *countingReg) NamesContext(context.Context, string, int) ([]registry.NameInfo, error) {
	c.calls.Add(1)
	return nil, nil
}

// startService serves o on a loopback port with the hardened listener.
func startService(t *testing.T, o Options) (*Service, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(o)
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s, ln.Addr().String()
}

func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(src), 0)), Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedSoon reports whether the server closed c within d.
func closedSoon(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

// TestConnectionLimits is the issue-14 row "19,984 idle keep-alive HTTP
// connections": connections are bounded in total and per source address,
// extra ones closed at accept, and a client elsewhere is still answered.
func TestConnectionLimits(t *testing.T) {
	s, addr := startService(t, Options{Registry: &fakeReg{}, Limits: Limits{MaxConns: 10, MaxConnsPerSource: 4}})
	// waitAccounted waits until the listener has decided on n connections
	// (kept or refused): a loaded machine may take a while to accept.
	waitAccounted := func(n uint64) *counters {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if uint64(s.cnt.open.Load())+s.cnt.perSource.Load()+s.cnt.rejected.Load() >= n || time.Now().After(deadline) {
				return s.cnt
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i := 0; i < 30; i++ {
		dialFrom(t, "127.0.0.1", addr)
	}
	if st := waitAccounted(30); s.cnt.open.Load() != 4 || s.cnt.perSource.Load() != 26 {
		t.Fatalf("30 idle connections from one address: %+v; want 4 open, 26 refused", metrics.Sprint(st))
	}
	for i := 2; i <= 3; i++ {
		for j := 0; j < 4; j++ {
			dialFrom(t, fmt.Sprintf("127.0.0.%d", i), addr)
		}
	}
	// 4 + 4 + 4 from three addresses: the total bound refuses the last 2.
	if st := waitAccounted(38); s.cnt.open.Load() != 10 || s.cnt.rejected.Load() != 2 || s.cnt.perSource.Load() != 26 {
		t.Fatalf("stats %+v; want 10 open (the total bound), 2 refused by it", metrics.Sprint(st))
	}
	// Full: another address is refused until a slot frees.
	if c := dialFrom(t, "127.0.0.9", addr); !closedSoon(c, 5*time.Second) || s.cnt.rejected.Load() != 3 {
		t.Fatalf("connection beyond max accepted; %+v", metrics.Sprint(s.cnt))
	}
}

// TestSlowRequestsClosed: a client trickling its headers or its body is
// closed at the read timeouts (a body at 1 byte/s was kept > 33 s).
func TestSlowRequestsClosed(t *testing.T) {
	_, addr := startService(t, Options{Registry: &fakeReg{}, Discover: func() error { return nil },
		Limits: Limits{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 600 * time.Millisecond}})
	for _, start := range []string{
		"GET /healthz HTTP/1.1\r\nHost: x\r\n",
		"POST /v1/discover HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
	} {
		c := dialFrom(t, "127.0.0.1", addr)
		c.Write([]byte(start))
		t0 := time.Now()
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
					c.Write([]byte("x"))
				}
			}
		}()
		closed := closedSoon(c, 10*time.Second)
		close(stop)
		if !closed {
			t.Fatalf("slow request %q still open after %v", start[:20], time.Since(t0))
		}
	}
}

type failingListener struct {
	net.Listener
	calls atomic.Int64
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.calls.Add(1)
	return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
}

// TestHTTPAcceptBacksOff: out of file descriptors, the HTTP accept loop
// pauses (5 ms doubling to 1 s) and logs one line per interval.
func TestHTTPAcceptBacksOff(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &failingListener{Listener: ln}
	s := New(Options{Registry: &fakeReg{}, Logger: zap.New(core)})
	go s.Serve(fl)
	time.Sleep(500 * time.Millisecond)
	s.Close()
	if n := fl.calls.Load(); n > 10 {
		t.Fatalf("%d accepts in 500 ms while failing; want a back-off", n)
	}
	if logs.Len() != 1 || s.cnt.acceptErrors.Load() == 0 {
		t.Fatalf("%d log lines, %+v", logs.Len(), metrics.Sprint(s.cnt))
	}
}
