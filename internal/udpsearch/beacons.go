package udpsearch

import (
	"sync"

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
}

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
	b.buf = pva.AppendBeacon(b.buf[:0], pva.FlagBigEndian|pva.FlagServer, &b.msg)
	b.send(b.buf)
	b.msg.Sequence++
	b.sent++
	b.timer = b.clk.AfterFunc(pva.BeaconAfter(b.sent), b.fire)
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
