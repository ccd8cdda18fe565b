package udpsearch

import (
	"testing"

	"github.com/pvans-project/pvans/internal/metrics"
)

// Each socket's SO_RXQ_OVFL is its own running total, modulo 2^32, and
// starts at 0 on a socket opened again: the counter adds what each grew
// by, so it never goes back (an interface change reopening the sockets)
// and the IPv4 and IPv6 sockets' drops add up.
func TestKernelDropsAddWhatEachSocketGrewBy(t *testing.T) {
	var c metrics.Counter
	var v4, v6 kernelDrops
	v4.note(&c, 3)
	v4.note(&c, 5) // +2
	v6.note(&c, 4) // the other family: +4
	v4.note(&c, 5) // no change
	if c.Load() != 9 {
		t.Fatalf("%d drops, want 9", c.Load())
	}
	var reopened kernelDrops // a new IPv4 socket: its count starts again
	reopened.note(&c, 1)
	if c.Load() != 10 {
		t.Fatalf("after a reopen: %d drops, want 10 (never back)", c.Load())
	}
	var wrapped kernelDrops
	wrapped.note(&c, 0xffffffff)
	wrapped.note(&c, 1) // modulo 2^32: +2
	if want := uint64(10 + 0xffffffff + 2); c.Load() != want {
		t.Fatalf("across the wrap: %d drops, want %d", c.Load(), want)
	}
}
