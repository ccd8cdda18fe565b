package udpsearch

import (
	"sync"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
)

// beaconer sends pvans's own beacons on PVXS's schedule (pva.BeaconAfter).
type beaconer struct {
	clk  clock.Clock
	send func(b []byte) // one datagram to every destination

	mu      sync.Mutex
	msg     pva.Beacon
	sent    int
	timer   clock.Timer
	stopped bool
	buf     []byte
	last    time.Time // when the last beacon went
}

// promptBeaconGap is the least time between a prompt beacon (prompt) and
// the beacon before it: a server restarting in a loop makes pvans beacon
// at most once a second, PVXS's own fastest rate at start.
const promptBeaconGap = time.Second

func newBeaconer(clk clock.Clock, guid pva.GUID, tcpPort uint16, send func([]byte)) *beaconer {
	return &beaconer{clk: clk, send: send,
		msg: pva.Beacon{GUID: guid, Addr: pva.AnyIPv4, Port: tcpPort, Protocol: "tcp"}}
}

func (b *beaconer) start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fireLocked()
}

func (b *beaconer) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fireLocked()
}

func (b *beaconer) fireLocked() {
	if b.stopped {
		return
	}
	b.sendLocked()
	b.sent++
	b.timer = b.clk.AfterFunc(pva.BeaconAfter(b.sent), b.fire)
}

func (b *beaconer) sendLocked() {
	b.buf = pva.AppendBeacon(b.buf[:0], pva.FlagBigEndian|pva.FlagServer, &b.msg)
	b.send(b.buf)
	b.msg.Sequence++
	b.last = b.clk.Now()
}

// prompt sends a beacon now, out of schedule, if the schedule runs and
// none went within promptBeaconGap.
func (b *beaconer) prompt() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped || b.timer == nil || b.clk.Now().Sub(b.last) < promptBeaconGap {
		return
	}
	b.sendLocked()
}

// bump moves the change count: pvans's own served set changed.
func (b *beaconer) bump() {
	b.mu.Lock()
	b.msg.ChangeCount++
	b.mu.Unlock()
}

// resume starts a stopped schedule again from its beginning.
func (b *beaconer) resume() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopped && b.timer != nil {
		return // running
	}
	if b.timer != nil {
		b.timer.Stop()
	}
	b.stopped, b.sent = false, 0
	b.fireLocked()
}

func (b *beaconer) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	if b.timer != nil {
		b.timer.Stop()
	}
}
