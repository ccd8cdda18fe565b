package udpsearch

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/metrics"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/ratelimit"
	"github.com/pvans-project/pvans/internal/resolver"
)

// The big client of the issue: 100,000 names on 10 servers, of the
// length that makes a PVXS client pack ~38 names into each search.
const (
	bigServers = 10
	bigNames   = 100_000
)

func bigName(i int) string {
	return fmt.Sprintf("bigclient:ioc%02d:ai:rec%05d:val", i%bigServers, i/bigServers)
}

func bigRegistry() *mapResolver {
	m := make(map[string]resolver.Endpoint, bigNames)
	for i := range bigNames {
		s := i % bigServers
		m[bigName(i)] = resolver.Endpoint{GUID: pva.GUID{byte(s + 1)},
			Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(5100+s)), Protocol: "tcp"}
	}
	return newMapResolver(m)
}

// pvxsBurst packs names 0..n-1 the way one tick of a PVXS client's search
// ring does (client.cpp tickSearch): one CMD_SEARCH after another, each
// filled while the whole message stays within 1400 bytes, CIDs counting
// from 1, all sent at once.
func pvxsBurst(n int, reply netip.Addr, port uint16) [][]byte {
	const maxSearchPayload = 1400
	var out [][]byte
	s := &pva.Search{Seq: 1, ReplyAddr: pva.AddressFrom(reply), ReplyPort: port, Protocols: [][]byte{[]byte("tcp")}}
	size := pva.HeaderSize + 4 + 4 + 16 + 2 + 1 + 1 + 3 + 2
	for i := range n {
		name := bigName(i)
		if len(s.Names) > 0 && size+4+1+len(name) > maxSearchPayload {
			out = append(out, pva.AppendSearch(nil, pva.FlagBigEndian, s))
			s.Seq++
			s.Names, size = s.Names[:0], pva.HeaderSize+4+4+16+2+1+1+3+2
		}
		s.Names = append(s.Names, pva.SearchName{CID: uint32(i + 1), Name: []byte(name)})
		size += 4 + 1 + len(name)
	}
	return append(out, pva.AppendSearch(nil, pva.FlagBigEndian, s))
}

// defaultLimits is the UDP policy's limits as the daemon sets them from
// the configuration defaults (internal/daemon udpPolicy).
func defaultLimits(o Options) Options {
	d := config.Defaults().RateLimit
	o.SearchRate, o.SearchBurst = d.UDPSearchesPerSecond, int(d.UDPSearchesPerSecond)*BurstSeconds
	o.NameRate, o.NameBurst = d.UDPNamesPerSecond, int(d.UDPNamesPerSecond)*BurstSeconds
	o.ReflectionRatio, o.ReflectionWindow = DefaultReflectionRatio, DefaultReflectionWindow
	return o
}

// claimedCIDs counts the distinct CIDs claimed in the replies to a.
func claimedCIDs(t *testing.T, out *recSender, a netip.Addr) (cids, bytes int) {
	t.Helper()
	seen := make(map[uint32]bool)
	for _, r := range out.replies {
		if r.to.Addr() != a {
			continue
		}
		bytes += len(r.b)
		_, m := decodeResponse(t, r.b)
		for _, c := range m.CIDs {
			seen[c] = true
		}
	}
	return len(seen), bytes
}

// A PVXS client's start-up tick of 100,000 names (~2,600 datagrams at one
// instant) from one address is answered in full at the default limits:
// not one datagram rate-limited or reflection-capped.
func TestBigClientBurstAnsweredAtDefaults(t *testing.T) {
	out := &recSender{}
	h, st := testHandler(t, defaultLimits(Options{AnswerNames: true, Resolver: bigRegistry(),
		Clock: clock.NewFake(time.Time{})}), out)
	burst := pvxsBurst(bigNames, netip.Addr{}, 40000)
	if len(burst) < 2500 || len(burst) > 2800 {
		t.Fatalf("%d datagrams: the burst should be ~2,630 as the issue's client sent", len(burst))
	}
	for _, b := range burst {
		h.handle(broadcastFrom(b, lanC1))
	}
	n, _ := claimedCIDs(t, out, lanC1.Addr())
	if n != bigNames || st.dropRateLimited.Load() != 0 || st.reflectionCapped.Load() != 0 {
		t.Fatalf("%d of %d names answered from %d datagrams; rate-limited %d, reflection-capped %d",
			n, bigNames, len(burst), st.dropRateLimited.Load(), st.reflectionCapped.Load())
	}
}

// The same burst from one source, spoofing a victim's reply address, and
// then kept up for 10 s: the victim gets at most DefaultReflectionRatio × the
// attacker's bytes, and the names pvans looks up for the source stay
// within its budget (burst plus rate × time), as for any flood, a repeat
// costing 1/RepeatShare of a new name (TestDistinctNameFloodLimited
// holds a flood of new names to the budget itself).
func TestBigFloodFromOneSourceBounded(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	out := &discardSender{}
	var sentBytes int
	o := defaultLimits(Options{AnswerNames: true, Resolver: bigRegistry(), Clock: clk})
	h, st := testHandler(t, o, sizeSender{out, &sentBytes})
	burst := pvxsBurst(bigNames, victim, 40000)
	recv := 0
	send := func(b []byte) {
		h.handle(broadcastFrom(b, lanC1))
		recv += len(b)
	}
	for _, b := range burst {
		send(b)
	}
	const step, steps, perStep = 100 * time.Millisecond, 100, 300
	for i := range steps {
		clk.Advance(step)
		for j := range perStep {
			send(burst[(i*perStep+j)%len(burst)])
		}
	}
	if float64(sentBytes) > o.ReflectionRatio*float64(recv) {
		t.Fatalf("victim got %d bytes for %d sent by the attacker: above %v×", sentBytes, recv, o.ReflectionRatio)
	}
	secs := (step * steps).Seconds()
	if maxDg := ratelimit.RepeatShare * (float64(o.SearchBurst) + o.SearchRate*secs + 1); float64(st.searches.Load()-st.dropRateLimited.Load()) > maxDg {
		t.Fatalf("%d datagrams handled in %v s, budget %v", st.searches.Load()-st.dropRateLimited.Load(), secs, maxDg)
	}
	if maxNames := ratelimit.RepeatShare * (float64(o.NameBurst) + o.NameRate*secs + 1); float64(st.searchNames.Load()) > maxNames {
		t.Fatalf("%d names looked up in %v s, budget %v", st.searchNames.Load(), secs, maxNames)
	}
	if out.replies == 0 {
		t.Fatalf("the flood should be answered up to its budget: %+v", metrics.Sprint(st))
	}
	t.Logf("flood: %d datagrams, %d answered names, %d replies (%d bytes) for %d bytes received; rate-limited %d",
		st.searches.Load(), st.claims.Load(), out.replies, sentBytes, recv, st.dropRateLimited.Load())
}

// sizeSender counts the bytes of the replies.
type sizeSender struct {
	*discardSender
	n *int
}

func (s sizeSender) reply(b []byte, to netip.AddrPort, from netip.Addr, i int) {
	*s.n += len(b)
	s.discardSender.reply(b, to, from, i)
}

// The name budget binds however a source packs its names: searches of
// 300 new names each against a burst of 1,000 names get three answered,
// and the budget refills at its rate; a search's datagram token alone
// would have let them all through. (Every search names others: repeats
// are priced apart, TestJavaBurstNotLimitedAtDefaults.)
func TestUDPNameBudget(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	out := &recSender{}
	reg := map[string]resolver.Endpoint{}
	var msgs [][]byte
	for r := range 13 {
		names := make([]string, 300)
		for i := range names {
			names[i] = fmt.Sprintf("n%02d-%03d", r, i)
			reg[names[i]] = srvA
		}
		msgs = append(msgs, searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, names...))
	}
	next := func() []byte { m := msgs[0]; msgs = msgs[1:]; return m }
	h, st := testHandler(t, Options{AnswerNames: true, Resolver: newMapResolver(reg), Clock: clk,
		SearchRate: 1000, SearchBurst: 1000, NameRate: 1000, NameBurst: 1000}, out)
	for range 10 {
		h.handle(broadcastFrom(next(), lanC1))
	}
	h.handle(broadcastFrom(next(), lanC2))
	if n, _ := repliesTo(out, lanC1.Addr()); n != 3 {
		t.Fatalf("%d searches of 300 names answered, want 3 (burst 1,000 names)", n)
	}
	if n, _ := repliesTo(out, lanC2.Addr()); n != 1 {
		t.Fatal("another source limited by the first one's names")
	}
	clk.Advance(200 * time.Millisecond) // 100 left + 200 earned: not yet 300
	h.handle(broadcastFrom(next(), lanC1))
	clk.Advance(100 * time.Millisecond)
	h.handle(broadcastFrom(next(), lanC1))
	if n, _ := repliesTo(out, lanC1.Addr()); n != 4 {
		t.Fatalf("after refilling: %d answered, want 4", n)
	}
	if st.dropRateLimited.Load() != 7+1 || st.searchNames.Load() != 5*300 {
		t.Fatalf("stats %+v", metrics.Sprint(st))
	}
}
