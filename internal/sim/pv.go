package sim

import (
	"sync"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
)

// pvState is an instance's process variables: every name is a counter
// that moves by one each Options.UpdateInterval (like a calc record
// scanned once a second), starting at a value that tells the PV apart
// (server index × 100000 + position). A PUT sets it; it counts on from
// there. Values are computed from the clock, so nothing runs per name;
// only subscribed monitors are told when a tick passes.
type pvState struct {
	in       *instance
	interval time.Duration // <= 0: values never change by themselves
	start    time.Time

	mu    sync.Mutex
	puts  map[string]float64 // name -> value minus ticks at the put
	subs  map[*monitor]struct{}
	timer clock.Timer
	done  bool
}

func (p *pvState) init(in *instance, now time.Time) {
	p.in, p.start = in, now
	p.interval = in.srv.site.opts.UpdateInterval
	p.puts = map[string]float64{}
	p.subs = map[*monitor]struct{}{}
}

func (p *pvState) ticks(now time.Time) int64 {
	if p.interval <= 0 || now.Before(p.start) {
		return 0
	}
	return int64(now.Sub(p.start) / p.interval)
}

// value returns name's value and the time it holds for.
func (in *instance) value(name string) (float64, time.Time) {
	p := &in.pvs
	now := in.srv.site.opts.Clock.Now()
	t := float64(p.ticks(now))
	p.mu.Lock()
	off, ok := p.puts[name]
	p.mu.Unlock()
	if !ok {
		off = float64(in.srv.index*100000 + in.srv.names.Load().index[name])
	}
	return off + t, now
}

// put sets name's value and returns its monitors, to be told (after the
// PUT reply went out, so a client sees its put complete first).
func (in *instance) put(name string, x float64) []*monitor {
	p := &in.pvs
	t := float64(p.ticks(in.srv.site.opts.Clock.Now()))
	p.mu.Lock()
	p.puts[name] = x - t
	var tell []*monitor
	for m := range p.subs {
		if m.ch.name == name {
			tell = append(tell, m)
		}
	}
	p.mu.Unlock()
	return tell
}

func (in *instance) subscribe(m *monitor) {
	p := &in.pvs
	p.mu.Lock()
	defer p.mu.Unlock()
	p.subs[m] = struct{}{}
	if p.timer == nil && !p.done && p.interval > 0 {
		p.arm()
	}
}

func (in *instance) unsubscribe(m *monitor) {
	p := &in.pvs
	p.mu.Lock()
	delete(p.subs, m)
	p.mu.Unlock()
}

// arm schedules the next tick boundary; p.mu held.
func (p *pvState) arm() {
	clk := p.in.srv.site.opts.Clock
	now := clk.Now()
	next := p.start.Add(time.Duration(p.ticks(now)+1) * p.interval)
	p.timer = clk.AfterFunc(next.Sub(now), p.tick)
}

// tick tells every monitor its value moved; it stays armed only while
// there are monitors.
func (p *pvState) tick() {
	p.mu.Lock()
	p.timer = nil
	if p.done || len(p.subs) == 0 {
		p.mu.Unlock()
		return
	}
	tell := make([]*monitor, 0, len(p.subs))
	for m := range p.subs {
		tell = append(tell, m)
	}
	p.arm()
	p.mu.Unlock()
	for _, m := range tell {
		m.changed()
	}
}

func (p *pvState) stop() {
	p.mu.Lock()
	p.done = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.mu.Unlock()
}
