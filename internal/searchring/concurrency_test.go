package searchring

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
)

// Every entry point used at once while time runs; run with -race.
func TestConcurrentUse(t *testing.T) {
	var resolved atomic.Int64
	r, clk, rc := newTestRing(t, Options{
		// Callbacks run without the ring's lock: calling back in must work.
		Resolved: func(name string, _ pva.GUID, _ netip.AddrPort) {
			resolved.Add(1)
		},
	})
	rc.countOnly = true
	rc.ups = []Upstream{&upstream{ready: true}}
	stop := make(chan struct{})
	var wg, ticker sync.WaitGroup
	ticker.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				clk.Advance(100 * time.Millisecond)
			}
		}
	})
	for w := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				name := pvName(w*10000+i%300, 20)
				switch i % 7 {
				case 0, 1, 2:
					r.Want(name)
				case 3:
					r.Drop(name)
				case 4:
					r.OnReply(udpSrc, ViaUDP, claim(guid(byte(w)), "tcp", 5075, uint32(i%500)))
				case 5:
					r.Reenter(name, Reason(i%3))
				case 6:
					r.Poke(PokeBeacon)
					_ = r.Stats()
					_ = r.Occupancy()
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	ticker.Wait()

	// The books balance once the dust settles.
	r.mu.Lock()
	defer r.mu.Unlock()
	live, searching := 0, 0
	for _, v := range r.live {
		live += v
	}
	for _, ch := range r.byName {
		if ch.state == stSearching {
			searching++
		}
		if r.byCID[ch.cid] != ch {
			t.Fatalf("CID map out of step for %s", ch.name)
		}
	}
	if searching != r.searching || live+r.nInitial != searching {
		t.Fatalf("searching %d, counted %d, ring %d + initial %d", searching, r.searching, live, r.nInitial)
	}
	t.Logf("%d channels, %d searching, %d resolved", len(r.byName), searching, resolved.Load())
}

// With the real clock the 10 ms initial search happens on its own.
func TestRealClockSmoke(t *testing.T) {
	got := make(chan string, 1)
	tr := &funcTransport{send: func(d []byte) {
		var m pva.Search
		s, err := decodeSearch(d, &m)
		if err == nil && len(s.names) == 1 {
			select {
			case got <- s.names[0]:
			default:
			}
		}
	}}
	r, err := New(Options{Clock: clock.Real{}, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Want("SMOKE")
	select {
	case n := <-got:
		if n != "SMOKE" {
			t.Fatalf("searched %q", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no search within 5 s")
	}
}

type funcTransport struct{ send func([]byte) }

func (f *funcTransport) SendUDP(d []byte, _ func(netip.AddrPort, error)) { f.send(d) }
func (f *funcTransport) Upstreams() []Upstream                           { return nil }
