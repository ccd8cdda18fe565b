package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pvans-project/pvans/internal/events"
	"github.com/pvans-project/pvans/internal/sim"
)

// narrator runs the demo's site commands and tells, from pvans' event log,
// what pvans did in response, in terms of the simulated servers: "server
// 1 restarted: new GUID …", "server 1 listed 100 names, 3 ms after …".
type narrator struct {
	site *sim.Site
	out  io.Writer

	mu      sync.Mutex // serialises output and guards the maps
	lastCmd map[int]command
	seen    map[string]seen // GUID -> when pvans saw it appear or restart
}

type seen struct {
	at      time.Time
	restart bool
}

type command struct {
	line string
	at   time.Time
}

func newNarrator(site *sim.Site, out io.Writer) *narrator {
	return &narrator{site: site, out: out, lastCmd: map[int]command{}, seen: map[string]seen{}}
}

// exec runs one command line and prints the simulator's answer.
func (n *narrator) exec(line string) {
	if strings.TrimSpace(line) == "" {
		return
	}
	// The command's time is taken before it runs: pvans can see its effect
	// (a closed connection) before Exec returns, and "after" must not be
	// negative.
	began := time.Now()
	res, err := n.site.Exec(line)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		fmt.Fprintln(n.out, "sim:", err)
		return
	}
	if f := strings.Fields(line); len(f) > 1 {
		if i, err := strconv.Atoi(f[1]); err == nil {
			n.lastCmd[i] = command{line: strings.Join(f, " "), at: began}
		}
	}
	if f := strings.Fields(line); f[0] == "new" {
		n.lastCmd[n.site.Len()-1] = command{line: "new", at: began}
	}
	for _, l := range strings.Split(res, "\n") {
		fmt.Fprintln(n.out, "sim:", l)
	}
}

// follow prints pvans' events as they come until done.
func (n *narrator) follow(log *events.Log, done <-chan struct{}) {
	_, seq := log.Since(0) // what happened before the banner is in the banner
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		var evs []events.Event
		evs, seq = log.Since(seq)
		for _, e := range evs {
			n.tell(e)
		}
	}
}

// server names the simulated server at endpoint, or the endpoint itself.
func (n *narrator) server(endpoint string) (string, int) {
	for _, s := range n.site.Servers() {
		if s.TCP.String() == endpoint {
			return "server " + strconv.Itoa(s.Index), s.Index
		}
	}
	return endpoint, -1
}

func short(guid string) string {
	if len(guid) > 8 {
		return guid[:8] + "…"
	}
	return guid
}

func ms(d time.Duration) string {
	if d < 10*time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
}

func (n *narrator) tell(e events.Event) {
	who, i := n.server(e.Endpoint)
	n.mu.Lock()
	defer n.mu.Unlock()
	after := ""
	if c, ok := n.lastCmd[i]; ok && i >= 0 {
		after = fmt.Sprintf(", %s after %q", ms(e.At.Sub(c.at)), c.line)
	}
	var line string
	switch e.Kind {
	case "appeared":
		n.seen[e.GUID] = seen{at: e.At}
		line = fmt.Sprintf("%s appeared: GUID %s (%s)%s", who, short(e.GUID), e.Detail, after)
	case "restart claimed":
		// A beacon with a new GUID at a known endpoint: a hint, which pvans
		// checks over TCP before the names move (docs/SECURITY.md, Trust).
		n.seen[e.GUID] = seen{at: e.At, restart: true}
		line = fmt.Sprintf("%s restarted: new GUID %s (%s; checking it over TCP)%s", who, short(e.GUID), e.Detail, after)
	case "restarted":
		if _, ok := n.seen[e.GUID]; !ok {
			n.seen[e.GUID] = seen{at: e.At, restart: true}
		}
		line = fmt.Sprintf("%s: new GUID %s %s", who, short(e.GUID), e.Detail)
	case "listed":
		what := strings.NewReplacer("(", "", ")", "").Replace(e.Detail) // "listed 100 names"
		line = fmt.Sprintf("%s %s", who, what)
		if sn, ok := n.seen[e.GUID]; ok {
			delete(n.seen, e.GUID)
			if sn.restart {
				what = "re-" + what
			}
			line = fmt.Sprintf("%s %s in %s (since its first beacon with GUID %s)", who, what, ms(e.At.Sub(sn.at)), short(e.GUID))
		}
	case "lost":
		line = fmt.Sprintf("%s (GUID %s) lost: %s; its names left the registry%s", who, short(e.GUID), e.Detail, after)
	case "sources changed":
		line = fmt.Sprintf("%s announced a change (beacon change count moved): listing it again%s", who, after)
	default:
		line = strings.TrimSpace(fmt.Sprintf("%s %s %s", who, e.Kind, e.Detail))
	}
	fmt.Fprintln(n.out, "pvans:", line)
}
