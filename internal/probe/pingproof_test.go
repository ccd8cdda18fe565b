package probe

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/sim"
)

// The ping's sequence ID is the only thing that makes a UDP answer to it
// (pvAccessCPP's) proof: it must not follow from the prober's jitter
// source, which an attacker can recover (it was seeded from the start
// time). Two probers with the same Rand draw different IDs.
func TestPingSeqNotFromJitterSource(t *testing.T) {
	var seqs [2][]uint32
	for i := range seqs {
		p := newProber(t, Options{Clock: clock.NewFake(time.Time{}), Rand: rand.New(rand.NewPCG(7, 7))})
		for range 4 {
			seqs[i] = append(seqs[i], p.pingSeq(&client{}))
		}
	}
	same := 0
	for i := range seqs[0] {
		if seqs[0][i] == seqs[1][i] {
			same++
		}
	}
	if same > 0 {
		t.Fatalf("ping sequence IDs follow the seeded jitter source: %x and %x", seqs[0], seqs[1])
	}
}

// A server that answers the ping over TCP is who that answer says, even
// when a datagram forged from its address with the right sequence ID
// arrives first.
func TestTCPPingAnswerBeatsForgedUDP(t *testing.T) {
	srv := startServer(t, sim.Options{}, "a:one")
	k := newSink()
	p := newProber(t, Options{Clock: clock.NewFake(time.Time{}), Sink: k, PingWait: time.Second})
	forged := pva.GUID{0x0b, 0xad}
	done := make(chan struct{})
	defer close(done)
	go func() { // forge the UDP answer the moment the ping is registered
		for {
			select {
			case <-done:
				return
			default:
			}
			p.mu.Lock()
			var seq uint32
			for s, cl := range p.pings {
				if cl.s.ep == srv.Addr() {
					seq = s
				}
			}
			p.mu.Unlock()
			if seq != 0 {
				p.PingAnswer(netip.AddrPortFrom(srv.Addr().Addr(), 5076), &pva.SearchResponse{GUID: forged, Seq: seq})
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	p.Probe(pva.GUID{}, srv.Addr(), ReasonStatic)
	if r := k.next(t, "listed", 5*time.Second); r.guid != srv.GUID() {
		t.Fatalf("listed as %v, want the GUID the server answered over TCP, %v (forged %v)", r.guid, srv.GUID(), forged)
	}
}

// A restart claim (a new GUID at an endpoint whose last attempt failed,
// as after the old instance's watch closed) is probed as a fresh probe,
// not behind the retries of other hosts' silent servers; an attempt
// prompted by nothing new after a failure is a retry.
func TestRestartClaimQueuesFresh(t *testing.T) {
	p := newProber(t, Options{Clock: clock.NewFake(time.Time{})})
	ep := netip.MustParseAddrPort("127.0.0.1:1")
	p.mu.Lock()
	s := &server{ep: ep, life: life{run: runProbing, id: ident{guid: pva.GUID{1}}}, failures: 1} // probing: Probe only marks it
	p.servers[ep] = s
	p.mu.Unlock()
	p.mu.Lock()
	retry := s.retryClass()
	p.mu.Unlock()
	if !retry {
		t.Fatal("a failed server's next attempt with nothing new is not a retry")
	}
	p.Probe(pva.GUID{2}, ep, ReasonChanged)
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.retryClass() {
		t.Fatal("a restart claim after a failure queued behind the retries")
	}
	if !s.retryClass() {
		t.Fatal("the claim's news counted twice")
	}
}

// Gone stays true after a loss until the endpoint answers over TCP again:
// a beacon (which anyone can forge) asking for a probe does not clear it,
// so a search-through confirmation that finished after the loss cannot
// re-register the dead server's names.
func TestGoneNotClearedByHint(t *testing.T) {
	srv := startServer(t, sim.Options{}, "x")
	k := newSink()
	c := clock.NewFake(time.Time{})
	p := newProber(t, Options{Clock: c, Sink: k})
	p.Probe(srv.GUID(), srv.Addr(), ReasonNew)
	k.next(t, "listed", 5*time.Second)
	srv.Close()
	k.next(t, "lost", 5*time.Second)
	if !p.Gone(srv.Addr()) {
		t.Fatal("Gone false after the loss was reported")
	}
	p.Probe(srv.GUID(), srv.Addr(), ReasonNew) // a beacon, forged or not: nothing answers
	c.Advance(5 * time.Second)
	time.Sleep(200 * time.Millisecond) // let the refused attempt settle
	if !p.Gone(srv.Addr()) {
		t.Fatal("a beacon cleared Gone while nothing answers at the endpoint")
	}
}
