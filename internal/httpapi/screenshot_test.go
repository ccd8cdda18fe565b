//go:build linux

package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/insight"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/registry"
)

// chromiumPath is Debian's chromium package (apt-get install -y chromium).
const chromiumPath = "/usr/bin/chromium"

// chromiumTimeout bounds one browser run; a run takes 1–3 s.
const chromiumTimeout = 60 * time.Second

// shotReg counts unverified servers, which fakeReg leaves at zero, so the
// page's "unverified" card has something to show.
type shotReg struct{ *fakeReg }

func (r shotReg) View() registry.View {
	v := r.fakeReg.View()
	for _, s := range r.servers {
		if !s.Verified {
			v.Counts.Unverified++
		}
	}
	return v
}

// screenshotSite is a small but complete site: healthy servers, one loaded
// from a snapshot and not yet confirmed, one whose probe fails, a
// duplicate name and a few events.
func screenshotSite() Options {
	now := time.Now()
	g3 := pva.GUID{0xaa, 0xbb, 0xcc, 0xdd, 1, 2, 3, 4, 5, 6, 7, 8}
	g4 := pva.GUID{0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0}
	a3 := netip.MustParseAddrPort("127.0.0.3:5075")
	a4 := netip.MustParseAddrPort("127.0.0.4:5075")
	reg := &fakeReg{
		servers: []registry.ServerInfo{
			{GUID: g1, Addr: a1, Protocol: "tcp", Version: 2, Discovered: registry.SourceBeacon, FirstSeen: now.Add(-time.Hour), LastSeen: now.Add(-3 * time.Second),
				ProbeState: registry.ProbeListed, ProbedAt: now.Add(-time.Minute), Names: 2, Held: 2, Verified: true},
			{GUID: g2, Addr: a2, Protocol: "tcp", Version: 2, Discovered: registry.SourceDiscovery, FirstSeen: now.Add(-time.Hour), LastSeen: now.Add(-20 * time.Second),
				ProbeState: registry.ProbeFailed, ProbeError: "connection refused", Names: 1, Verified: true},
			{GUID: g3, Addr: a3, Protocol: "tcp", Version: 2, Discovered: registry.SourceStatic, LastSeen: now.Add(-2 * time.Minute),
				ProbeState: registry.ProbeNone, Names: 1, Held: 1, Verified: false},
			{GUID: g4, Addr: a4, Protocol: "tcp", Version: 2, Discovered: registry.SourceBeacon, FirstSeen: now.Add(-time.Hour), LastSeen: now.Add(-time.Second),
				ProbeState: registry.ProbeListed, Names: 1, Held: 1, Verified: true},
		},
		names: []registry.NameInfo{
			{Name: "ioc:a:temp", GUID: g1, Addr: a1, How: registry.SourceProbe, Claimant: 1},
			{Name: "ioc:a:press", GUID: g1, Addr: a1, How: registry.SourceProbe},
			{Name: "ioc:c:flow", GUID: g3, Addr: a3, How: registry.SourceProbe},
			{Name: "ioc:d:valve", GUID: g4, Addr: a4, How: registry.SourceSearchThrough},
		},
		dups: []registry.Duplicate{{Name: "ioc:a:temp", Holder: g1, HolderAddr: a1, Claimant: g2, ClaimantAddr: a2, Since: now.Add(-5 * time.Minute)}},
	}
	ev := events.New(20)
	ev.Add(events.Event{At: now.Add(-time.Hour), Kind: "appeared", GUID: g1.String(), Endpoint: a1.String()})
	ev.Add(events.Event{At: now.Add(-50 * time.Minute), Kind: "listed", GUID: g1.String(), Endpoint: a1.String(), Detail: "2 names"})
	ev.Add(events.Event{At: now.Add(-5 * time.Minute), Kind: "duplicate", GUID: g2.String(), Endpoint: a2.String(), Detail: "ioc:a:temp also claimed"})
	ev.Add(events.Event{At: now.Add(-time.Minute), Kind: "unlistable", GUID: g2.String(), Endpoint: a2.String(), Detail: "connection refused"})
	return Options{Registry: shotReg{reg}, Events: ev, Version: "v0.0.0-test", Started: now.Add(-2 * time.Hour),
		Ready: func() (bool, string) { return true, "" }, Insight: shotInsight(reg)}
}

// shotInsight is a minute of search traffic: a display searching for a
// typo, an archiver for a retired IOC's names, a client asking for a held
// name too.
func shotInsight(reg *fakeReg) *insight.Insight {
	clk := clock.NewFake(time.Now().Add(-time.Minute))
	in := insight.New(insight.Options{QueueBytes: stagingBytes, Names: 100, Clients: 100, Clock: clk,
		Known: func(n string) bool { _, ok := reg.Name(n); return ok }})
	var t testing.T // searchAs only fails on a codec bug, caught by the insight tests
	for range 60 {
		for range 25 {
			searchAs(&t, in, "10.0.4.17", false, []int{1}, 1, "ioc:a:temp", "ioc:a:tmep")
		}
		for range 8 {
			searchAs(&t, in, "10.0.9.3", true, []int{0, 1}, 0, "old:ioc:pump1", "old:ioc:pump2")
		}
		searchAs(&t, in, "10.0.4.18", false, []int{1}, 1, "ioc:c:flow", "ioc:a:tmep")
		in.Flush()
		clk.Advance(time.Second)
	}
	return in
}

// healthySite is screenshotSite with its troubles fixed: every server
// verified and listed, no duplicates, only good news in the log.
func healthySite() Options {
	o := screenshotSite()
	reg := o.Registry.(shotReg).fakeReg
	for i := range reg.servers {
		reg.servers[i].Verified, reg.servers[i].ProbeState, reg.servers[i].ProbeError = true, registry.ProbeListed, ""
		reg.servers[i].Held = reg.servers[i].Names
	}
	reg.dups = nil
	for i := range reg.names {
		reg.names[i].Claimant = 0
	}
	ev := events.New(20)
	ev.Add(events.Event{At: time.Now().Add(-time.Hour), Kind: "appeared", GUID: g1.String(), Endpoint: a1.String()})
	ev.Add(events.Event{At: time.Now().Add(-time.Minute), Kind: "listed", GUID: g1.String(), Endpoint: a1.String(), Detail: "2 names"})
	o.Events = ev
	return o
}

var (
	okColour   = [3]uint8{0x1a, 0x7f, 0x37}
	badColour  = [3]uint8{0xc6, 0x28, 0x28}
	warnColour = [3]uint8{0xb2, 0x6a, 0x00}
)

// TestStatusPageScreenshot renders the status page in headless Chromium and
// checks the picture, not just the HTML: it has the window's size, is not
// blank, and shows the state colours an operator reads at a glance, with
// the banner at the top in the colour of the site's worst problem.
func TestStatusPageScreenshot(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("%s not found; install Debian's chromium package (apt-get install -y chromium) to run this test: %v", chromiumPath, err)
	}
	dir := t.TempDir()

	t.Run("troubled", func(t *testing.T) {
		// One browser run gives both the picture and the rendered DOM.
		img, dom := screenshot(t, dir, serve(t, screenshotSite()), "status.png", "--dump-dom")
		p := scan(t, img)
		// A pill is about 90×18 pixels of solid colour; 500 pixels means at
		// least one badge-sized area, not a few antialiased glyph edges.
		for name, n := range map[string]int{"ok": p.all[okColour], "bad": p.all[badColour], "warn": p.all[warnColour]} {
			if n < 500 {
				t.Errorf("%s colour covers %d pixels, want a badge's worth (>= 500)", name, n)
			}
		}
		// The banner is a full-width strip near the top: a failing probe
		// makes it red.
		if n := p.top[badColour]; n < 20000 {
			t.Errorf("top of page has %d red pixels, want a red banner (>= 20000)", n)
		}
		if n := p.top[okColour]; n > 2000 {
			t.Errorf("top of page has %d green pixels; the banner should not look healthy", n)
		}

		for _, want := range []string{`id="server-table"`, `id="dup-table"`, `id="event-table"`, `id="health"`,
			`id="lookup"`, `id="unresolved-table"`, `id="client-table"`, "ioc:a:tmep", "old:ioc:pump1", "10.0.4.17", "10.0.9.3",
			"127.0.0.1:5075", "127.0.0.2:5085", "127.0.0.3:5075", "127.0.0.4:5075",
			"probe failed", "unverified", "connection refused", "ioc:a:temp", "degraded"} {
			if !strings.Contains(dom, want) {
				t.Errorf("rendered DOM lacks %q", want)
			}
		}
		// The failing server is listed first, ahead of the address order.
		if i, j := strings.Index(dom, "127.0.0.2:5085"), strings.Index(dom, "127.0.0.1:5075"); i < 0 || j < 0 || i > j {
			t.Errorf("failing server 127.0.0.2:5085 is not listed before healthy 127.0.0.1:5075")
		}
		if t.Failed() {
			t.Logf("DOM:\n%s", dom)
		}
	})

	// The search sections, with a lookup answered "not found", in a
	// window tall enough to show them.
	t.Run("insight", func(t *testing.T) {
		img, dom := screenshotSized(t, dir, serve(t, screenshotSite())+"?name=ioc:a:tmep", "status-insight.png", 1700, "--dump-dom")
		answer := between(dom, `id="lookup-answer"`, "</div>")
		if !strings.Contains(answer, "not found") || !strings.Contains(answer, "searched 1560 times by 2 client(s) in the last hour") {
			t.Errorf("lookup answer: %s", answer)
		}
		inOrder(t, between(dom, `id="unresolved-table"`, "</table>"), "ioc:a:tmep", "old:ioc:pump1")
		inOrder(t, between(dom, `id="client-table"`, "</table>"), "10.0.4.17", "10.0.9.3", "10.0.4.18")
		// The not-found rows and the lookup pill are amber and red: the
		// sections were drawn, not just present in the DOM.
		p := scan(t, img)
		if p.all[warnColour] < 500 || p.all[badColour] < 500 {
			t.Errorf("search sections drew %d amber and %d red pixels", p.all[warnColour], p.all[badColour])
		}
	})

	t.Run("healthy", func(t *testing.T) {
		img, _ := screenshot(t, dir, serve(t, healthySite()), "status-healthy.png")
		p := scan(t, img)
		if n := p.top[okColour]; n < 20000 {
			t.Errorf("top of page has %d green pixels, want a green banner (>= 20000)", n)
		}
		if n := p.all[badColour] + p.all[warnColour]; n > 200 {
			t.Errorf("healthy site shows %d red/amber pixels, want none to speak of", n)
		}
	})
}

// TestStatusPageFollowsChanges: the page open in a browser reloads itself
// when a server appears (once it is statusMinReload old), without waiting
// for its meta refresh. The browser runs the page's script on virtual time
// (--virtual-time-budget, which stands still while a request is pending):
// it loads the page, its long poll waits, a server appears, the poll
// answers, the page reloads statusMinReload after its load and the next
// poll waits until this test ends it; the DOM is dumped once the script's
// pause after that poll has used up the budget.
func TestStatusPageFollowsChanges(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("%s not found; install Debian's chromium package (apt-get install -y chromium) to run this test: %v", chromiumPath, err)
	}
	reg := liveReg{registry.New(registry.Options{})}
	if _, err := reg.Listed(registry.ServerInfo{GUID: g1, Addr: a1, Discovered: registry.SourceBeacon}, []string{"ioc:a:temp"}, registry.SourceProbe); err != nil {
		t.Fatal(err)
	}
	first, _ := reg.Revision()
	clk := clock.NewFake(time.Now())
	h := Handler(Options{Registry: reg, Clock: clk, Version: "v0.0.0-test", Ready: func() (bool, string) { return true, "" }})
	polls := make(chan string, 100)
	pages := 0
	var mu sync.Mutex
	o := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			mu.Lock()
			pages++
			mu.Unlock()
		case "/v1/changes":
			polls <- r.URL.Query().Get("revision")
		}
		h.ServeHTTP(w, r)
	})
	stop := make(chan struct{})
	driven := make(chan error, 1)
	go func() {
		// The first poll is the first page's: a server appears. Later polls
		// are the reloaded page's: end their wait.
		appeared := false
		for {
			select {
			case <-stop:
				driven <- nil
				return
			case rev := <-polls:
				switch {
				case rev == strconv.FormatUint(first, 10) && !appeared:
					appeared = true
					if _, err := reg.UpsertServer(registry.ServerInfo{GUID: g2, Addr: a2, Discovered: registry.SourceBeacon}); err != nil {
						driven <- err
						return
					}
				case appeared:
					for clk.Pending() == 0 {
						select {
						case <-stop:
							driven <- nil
							return
						case <-time.After(time.Millisecond):
						}
					}
					clk.Advance(time.Minute)
				}
			}
		}
	}()
	budget := strconv.FormatInt((statusMinReload + 2*time.Second).Milliseconds(), 10)
	dom := runChromium(t, t.TempDir(), "--dump-dom", "--virtual-time-budget="+budget, serveHandler(t, o))
	close(stop)
	if err := <-driven; err != nil {
		t.Fatal(err)
	}
	now, _ := reg.Revision()
	mu.Lock()
	loads := pages
	mu.Unlock()
	if loads < 2 {
		t.Errorf("the page was loaded %d times; want a reload after the server appeared", loads)
	}
	for _, want := range []string{a1.String(), a2.String(), `data-revision="` + strconv.FormatUint(now, 10) + `"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page in the browser lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
}

// TestStatusPageReloadsAtMostEvery: a registry that never stops changing
// (a flapping server, forged beacons creating servers as fast as they
// arrive) does not make an open page reload as fast as the browser renders
// it: a page reloads at once on a change only when it is statusMinReload
// old, else when it gets there, so a wall of open pages costs no more
// renders than the page's old fixed refresh. Every poll of the page finds
// a new server. The browser runs on virtual time (Date.now() included),
// so the test takes no real time for the pauses; each load reports its
// virtual time.
func TestStatusPageReloadsAtMostEvery(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("%s not found; install Debian's chromium package (apt-get install -y chromium) to run this test: %v", chromiumPath, err)
	}
	reg := liveReg{registry.New(registry.Options{})}
	h := Handler(Options{Registry: reg, Version: "v0.0.0-test", Ready: func() (bool, string) { return true, "" }})
	const changes = 4
	var mu sync.Mutex
	var loads []int64 // virtual Date.now() of each load
	polls := 0
	o := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/loaded":
			ms, err := strconv.ParseInt(r.URL.Query().Get("at"), 10, 64)
			if err != nil {
				t.Errorf("/loaded?%s: %v", r.URL.RawQuery, err)
			}
			mu.Lock()
			loads = append(loads, ms)
			mu.Unlock()
			return
		case "/":
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			page := strings.Replace(rec.Body.String(), "</body>", `<script>fetch("/loaded?at="+Date.now())</script></body>`, 1)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte(page))
			return
		case "/v1/changes":
			mu.Lock()
			polls++
			n := polls
			mu.Unlock()
			if n > changes {
				// Answered at once: a waiting request stops virtual time.
				r.URL.RawQuery += "&wait=0s"
			} else {
				g := pva.GUID{0xEE, 11: byte(n)}
				ep := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 1, byte(n)}), 5075)
				if _, err := reg.UpsertServer(registry.ServerInfo{GUID: g, Addr: ep, Discovered: registry.SourceBeacon}); err != nil {
					t.Error(err)
				}
			}
		}
		h.ServeHTTP(w, r)
	})
	// The budget starts again at each load (so it is not the test's clock).
	budget := strconv.FormatInt((statusMinReload + time.Second).Milliseconds(), 10)
	runChromium(t, t.TempDir(), "--dump-dom", "--virtual-time-budget="+budget, serveHandler(t, o))
	mu.Lock()
	defer mu.Unlock()
	if len(loads) != changes+1 {
		t.Errorf("%d loads after %d changes; want a reload for each (%v)", len(loads), changes, loads)
	}
	for i := 1; i < len(loads); i++ {
		// The page's clock starts a few ms before the load is reported.
		if gap := time.Duration(loads[i]-loads[i-1]) * time.Millisecond; gap < statusMinReload*9/10 {
			t.Errorf("load %d came %v after the one before; want about %v at least", i, gap, statusMinReload)
		}
	}
}

// serve starts the real handler on 127.0.0.1, the one address the
// browser is allowed to reach.
func serve(t *testing.T, o Options) string {
	t.Helper()
	return serveHandler(t, Handler(o))
}

// serveHandler serves h on 127.0.0.1.
func serveHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// screenshot captures url at 1280×900 and decodes it, keeping a copy in
// $PVANS_SCREENSHOT_DIR when set so a person can look at it. It also
// returns Chromium's stdout, which holds the DOM when extra has
// --dump-dom.
func screenshot(t *testing.T, dir, url, name string, extra ...string) (image.Image, string) {
	t.Helper()
	return screenshotSized(t, dir, url, name, 900, extra...)
}

// screenshotSized is screenshot with a window height other than 900 (the
// page's lower sections).
func screenshotSized(t *testing.T, dir, url, name string, height int, extra ...string) (image.Image, string) {
	t.Helper()
	extra = append(extra, fmt.Sprintf("--window-size=1280,%d", height))
	shot := filepath.Join(dir, name)
	start := time.Now()
	out := runChromium(t, dir, append(extra, "--screenshot="+shot, url)...)
	t.Logf("chromium %v took %v", extra, time.Since(start).Round(time.Millisecond))
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v", err)
	}
	if keep := os.Getenv("PVANS_SCREENSHOT_DIR"); keep != "" {
		if err := os.MkdirAll(keep, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(keep, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot saved as %s", filepath.Join(keep, name))
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if bd := img.Bounds(); bd.Dx() != 1280 || bd.Dy() != height {
		t.Fatalf("screenshot is %dx%d, want 1280x%d", bd.Dx(), bd.Dy(), height)
	}
	return img, out
}

// runChromium runs headless Chromium once on url and returns its stdout.
// The flags keep it off every network but loopback: no background fetches,
// no component updates, and a resolver and proxy that fail anything not on
// 127.0.0.1, so a stray request cannot leave the machine.
func runChromium(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), chromiumTimeout)
	defer cancel()
	profile, err := os.MkdirTemp(dir, "profile")
	if err != nil {
		t.Fatal(err)
	}
	flags := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--disable-default-apps", "--disable-dev-shm-usage",
		"--dns-prefetch-disable", "--no-pings", "--disable-domain-reliability",
		"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
		"--proxy-server=127.0.0.1:9", "--proxy-bypass-list=127.0.0.1",
		"--hide-scrollbars", "--force-device-scale-factor=1",
		"--user-data-dir=" + profile,
	}
	cmd := exec.CommandContext(ctx, chromiumPath, append(flags, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// /usr/bin/chromium is a wrapper script and the browser forks zygote,
	// renderer and GPU helpers: on timeout kill the whole process group we
	// started, and don't wait forever on helpers holding the pipes open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("chromium timed out after %v; stderr:\n%s", chromiumTimeout, stderr.String())
		}
		t.Fatalf("chromium %v: %v; stderr:\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// pixels counts the state colours in a screenshot, over the whole page
// and over its top (header and banner).
type pixels struct{ all, top map[[3]uint8]int }

// topRows is how far down the banner must start: below the header, above
// the counts.
const topRows = 150

// scan checks the screenshot is a rendered page, not a blank or unstyled
// one, and counts the state colours. Colours match exactly: the badges and
// banner are solid fills, so only antialiased glyph edges differ, and
// those are not what should make a check pass.
func scan(t *testing.T, img image.Image) pixels {
	t.Helper()
	b := img.Bounds()
	rgba, ok := img.(*image.RGBA)
	if !ok { // Chromium writes opaque RGB, which decodes as *image.RGBA
		rgba = image.NewRGBA(b)
		draw.Draw(rgba, b, img, b.Min, draw.Src)
	}
	p := pixels{all: map[[3]uint8]int{}, top: map[[3]uint8]int{}}
	colours := map[[3]uint8]int{}
	ink := 0 // dark pixels: text, mostly
	for y := 0; y < b.Dy(); y++ {
		row := rgba.Pix[y*rgba.Stride : y*rgba.Stride+4*b.Dx()]
		for i := 0; i < len(row); i += 4 {
			c := [3]uint8{row[i], row[i+1], row[i+2]}
			colours[c]++
			if int(c[0])+int(c[1])+int(c[2]) < 3*0x80 {
				ink++
			}
			if c == okColour || c == badColour || c == warnColour {
				p.all[c]++
				if y < topRows {
					p.top[c]++
				}
			}
		}
	}
	bg, bgN := [3]uint8{}, 0
	for c, n := range colours {
		if n > bgN {
			bg, bgN = c, n
		}
	}
	total := b.Dx() * b.Dy()
	t.Logf("%d distinct colours; background #%02x%02x%02x is %.0f%%; %.1f%% dark; state colours ok=%d bad=%d warn=%d (top: %d/%d/%d)",
		len(colours), bg[0], bg[1], bg[2], 100*float64(bgN)/float64(total), 100*float64(ink)/float64(total),
		p.all[okColour], p.all[badColour], p.all[warnColour], p.top[okColour], p.top[badColour], p.top[warnColour])
	// Antialiased text alone yields hundreds of shades; a blank page has one.
	if len(colours) < 256 {
		t.Errorf("only %d distinct colours: the page looks blank or unstyled", len(colours))
	}
	if frac := float64(bgN) / float64(total); frac > 0.9 {
		t.Errorf("background colour covers %.0f%% of the page: it looks blank", 100*frac)
	}
	if frac := float64(ink) / float64(total); frac < 0.02 {
		t.Errorf("only %.2f%% of pixels are dark: too little drawn (text, header) for a status page", 100*frac)
	}
	return p
}
