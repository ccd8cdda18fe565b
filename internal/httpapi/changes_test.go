package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/registry"
)

// liveReg is a real registry as the API reads it (the daemon's adapter,
// without the beacon tracker).
type liveReg struct{ *registry.Registry }

func (l liveReg) Name(n string) (registry.NameInfo, bool) {
	h, ok := l.LookupName(n)
	if !ok {
		return registry.NameInfo{}, false
	}
	return registry.NameInfo{Name: n, GUID: h.GUID, Addr: h.Addr}, true
}

// poll is one GET on h, served on its own goroutine: its answer arrives
// on the returned channel.
func poll(h http.Handler, ctx context.Context, target string) <-chan *httptest.ResponseRecorder {
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1"+target, nil).WithContext(ctx))
		done <- rec
	}()
	return done
}

// answer returns the answer of a poll; a wait that never ends fails.
func answer(t *testing.T, what string, done <-chan *httptest.ResponseRecorder) *httptest.ResponseRecorder {
	t.Helper()
	select {
	case rec := <-done:
		return rec
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer", what)
		return nil
	}
}

func unanswered(t *testing.T, what string, done <-chan *httptest.ResponseRecorder) {
	t.Helper()
	select {
	case rec := <-done:
		t.Fatalf("%s: answered %d %s before a change or the end of its wait", what, rec.Code, rec.Body)
	default:
	}
}

func revisionOf(t *testing.T, rec *httptest.ResponseRecorder) uint64 {
	t.Helper()
	var c Changes
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &c) != nil {
		t.Fatalf("answer %d %s", rec.Code, rec.Body)
	}
	if h := rec.Header().Get(RevisionHeader); h != strconv.FormatUint(c.Revision, 10) {
		t.Fatalf("%s header %q, body revision %d", RevisionHeader, h, c.Revision)
	}
	return c.Revision
}

// waitPending waits until n waits have started their timer.
func waitPending(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clk.Pending() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waits pending, want %d", clk.Pending(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestChangesLongPoll: GET /v1/changes?revision=N answers at once when the
// registry's revision is not N, and otherwise waits — for a change of the
// servers (a real registry's watch), or for the end of its wait, which is
// capped — and a waiter whose client left is let go.
func TestChangesLongPoll(t *testing.T) {
	reg := liveReg{registry.New(registry.Options{})}
	clk := clock.NewFake(time.Time{})
	h := Handler(Options{Registry: reg, Clock: clk})
	ctx := context.Background()

	rev := revisionOf(t, answer(t, "no revision", poll(h, ctx, "/v1/changes")))
	if got := revisionOf(t, answer(t, "another revision", poll(h, ctx, "/v1/changes?revision="+strconv.FormatUint(rev+7, 10)))); got != rev {
		t.Fatalf("another revision: answered %d, want the current %d", got, rev)
	}

	// A change answers a waiting request at once, with the new revision.
	at := "/v1/changes?revision=" + strconv.FormatUint(rev, 10)
	w := poll(h, ctx, at)
	waitPending(t, clk, 1)
	unanswered(t, "before the change", w)
	if _, err := reg.UpsertServer(registry.ServerInfo{GUID: g1, Addr: a1}); err != nil {
		t.Fatal(err)
	}
	changed := revisionOf(t, answer(t, "after a new server", w))
	if changed == rev {
		t.Fatalf("answered the old revision %d after a change", rev)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/v1/servers", nil))
	if rec.Header().Get(RevisionHeader) != strconv.FormatUint(changed, 10) {
		t.Fatalf("/v1/servers at revision %q, want %d", rec.Header().Get(RevisionHeader), changed)
	}

	// Without a change, the wait ends: the default (WriteTimeout less
	// WaitMargin), a shorter one asked for, a longer one capped.
	at = "/v1/changes?revision=" + strconv.FormatUint(changed, 10)
	for _, c := range []struct {
		wait  string
		lasts time.Duration
	}{{"", WriteTimeout - WaitMargin}, {"&wait=2s", 2 * time.Second}, {"&wait=1h", WriteTimeout - WaitMargin}} {
		w := poll(h, ctx, at+c.wait)
		waitPending(t, clk, 1)
		clk.Advance(c.lasts - time.Millisecond)
		unanswered(t, "wait"+c.wait+" not over", w)
		clk.Advance(time.Millisecond)
		if got := revisionOf(t, answer(t, "wait"+c.wait+" over", w)); got != changed {
			t.Fatalf("wait%s: answered %d without a change, want %d", c.wait, got, changed)
		}
	}
	if got := revisionOf(t, answer(t, "wait=0s", poll(h, ctx, at+"&wait=0s"))); got != changed {
		t.Fatalf("wait=0s: %d", got)
	}

	// A client that leaves frees its place.
	cctx, cancel := context.WithCancel(ctx)
	w = poll(h, cctx, at)
	waitPending(t, clk, 1)
	cancel()
	answer(t, "client gone", w)
	waitPending(t, clk, 0)

	for _, bad := range []string{"revision=x", "revision=-1", "wait=soon", "wait=-1s"} {
		if rec := answer(t, bad, poll(h, ctx, "/v1/changes?"+bad)); rec.Code != 400 {
			t.Errorf("%s: %d, want 400", bad, rec.Code)
		}
	}
}

// TestChangesWaitersBounded: at most half of MaxConns requests wait at
// once; the next is answered 503 with Retry-After (and counted), so
// waiting pages cannot hold every connection.
func TestChangesWaitersBounded(t *testing.T) {
	reg := &fakeReg{rev: 3}
	clk := clock.NewFake(time.Time{})
	s := New(Options{Registry: reg, Clock: clk, Limits: Limits{MaxConns: 4}})
	h := s.srv.Handler
	ctx := context.Background()
	a, b := poll(h, ctx, "/v1/changes?revision=3"), poll(h, ctx, "/v1/changes?revision=3")
	waitPending(t, clk, 2)
	rec := answer(t, "third waiter", poll(h, ctx, "/v1/changes?revision=3"))
	if rec.Code != 503 || rec.Header().Get("Retry-After") == "" || s.cnt.waitersBusy.Load() != 1 {
		t.Fatalf("third waiter: %d %q, %d counted; want 503 with Retry-After, counted", rec.Code, rec.Header().Get("Retry-After"), s.cnt.waitersBusy.Load())
	}
	if got := revisionOf(t, answer(t, "no wait asked", poll(h, ctx, "/v1/changes"))); got != 3 {
		t.Fatalf("a request that does not wait is answered: %d", got)
	}
	clk.Advance(time.Minute)
	answer(t, "first waiter", a)
	answer(t, "second waiter", b)
	// Their places are free again.
	c := poll(h, ctx, "/v1/changes?revision=3")
	waitPending(t, clk, 1)
	clk.Advance(time.Minute)
	if rec := answer(t, "waiter after the others", c); rec.Code != 200 {
		t.Fatalf("after the waits ended: %d", rec.Code)
	}
}

// TestChangesWaitEndsAtShutdown: a waiting request does not hold the
// daemon's shutdown for its wait: it is answered at once.
func TestChangesWaitEndsAtShutdown(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	s, addr := startService(t, Options{Registry: &fakeReg{rev: 5}, Clock: clk})
	got := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/v1/changes?revision=5")
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	waitPending(t, clk, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a waiting request: %v", err)
	}
	resp := <-got
	if resp == nil || resp.StatusCode != 200 {
		t.Fatalf("waiting request at shutdown: %+v", resp)
	}
	resp.Body.Close()
}
