package udpsearch

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
)

// javaChannels is a Phoebus display's start-up: enough channels that
// re-searching them as the Java client does is well over the default
// name burst (1,000 channels: 500,500 names), as the client was.
const javaChannels = 1000

func javaName(i int) string { return fmt.Sprintf("SIM:ioc%02d:ai%05d:val", i%10, i) }

func javaRegistry(n int) *mapResolver {
	m := make(map[string]resolver.Endpoint, n)
	for i := range n {
		m[javaName(i)] = resolver.Endpoint{GUID: pva.GUID{byte(i%10 + 1)},
			Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(5100+i%10)), Protocol: "tcp"}
	}
	return newMapResolver(m)
}

// javaBurst is a Phoebus (core-pva) client opening n channels one by
// one: each open starts a search round that searches every channel not
// yet connected, and none connects before the last is opened (the worst
// case). A round is packed as ChannelSearch.runSearches packs it, each
// message's names under 1,390 bytes, with the round number as the
// sequence (its bucket index); flags 0 on UDP, as to a broadcast
// address, and replies to reply (unspecified: the sender) at port.
func javaBurst(n int, flags uint8, reply netip.Addr, port uint16) [][]byte {
	const maxPayload = 1440 - 50
	var out [][]byte
	for round := 1; round <= n; round++ {
		s := &pva.Search{Seq: uint32(round % 34), Flags: flags, ReplyAddr: pva.AddressFrom(reply), ReplyPort: port, Protocols: [][]byte{[]byte("tcp")}}
		size := 0
		for i := range round {
			name := javaName(i)
			if len(s.Names) > 0 && size+4+1+len(name) >= maxPayload {
				out = append(out, pva.AppendSearch(nil, pva.FlagBigEndian, s))
				s.Names, size = s.Names[:0], 0
			}
			s.Names = append(s.Names, pva.SearchName{CID: uint32(i + 1), Name: []byte(name)})
			size += 4 + 1 + len(name)
		}
		out = append(out, pva.AppendSearch(nil, pva.FlagBigEndian, s))
	}
	return out
}

// The Java client's start-up burst at the default limits: its searches
// name the same channels again and again within milliseconds, which
// costs it a 64th of a new name each, so not one is rate-limited nor
// reflection-capped, and every channel is answered. Before repeats were
// priced apart the names past the 400,000 of the default burst were
// dropped.
func TestJavaBurstNotLimitedAtDefaults(t *testing.T) {
	out := &recSender{}
	h, st := testHandler(t, defaultLimits(Options{AnswerNames: true, Resolver: javaRegistry(javaChannels),
		Clock: clock.NewFake(time.Time{})}), out)
	burst := javaBurst(javaChannels, 0, netip.Addr{}, lanC1.Port())
	names := 0
	for _, b := range burst {
		h.handle(broadcastFrom(b, lanC1))
	}
	names = int(st.searchNames.Load())
	n, _ := claimedCIDs(t, out, lanC1.Addr())
	t.Logf("%d datagrams, %d names searched; rate-limited %d, reflection-capped %d; %d of %d channels answered",
		len(burst), names, st.dropRateLimited.Load(), st.reflectionCapped.Load(), n, javaChannels)
	if st.dropRateLimited.Load() != 0 || st.reflectionCapped.Load() != 0 || n != javaChannels {
		t.Fatalf("rate-limited %d of %d datagrams, reflection-capped %d; %d of %d channels answered",
			st.dropRateLimited.Load(), len(burst), st.reflectionCapped.Load(), n, javaChannels)
	}
}

// The same burst aimed at a victim (its address as the reply address):
// a repeat is answered like any search, so its reply bytes count, and
// the victim never gets more than the reflection ratio × the bytes sent,
// though the flood is cheap for the limits (here a ratio of 0.25, so that it binds).
func TestRepeatsStayUnderReflectionCap(t *testing.T) {
	var sent int
	o := defaultLimits(Options{AnswerNames: true, Resolver: javaRegistry(javaChannels), Clock: clock.NewFake(time.Time{})})
	o.ReflectionRatio = 0.25
	h, st := testHandler(t, o, sizeSender{&discardSender{}, &sent})
	recv := 0
	for _, b := range javaBurst(javaChannels, 0, victim, 40000) {
		h.handle(broadcastFrom(b, lanC1))
		recv += len(b)
	}
	t.Logf("victim got %d bytes for %d sent; rate-limited %d, reflection-capped %d", sent, recv, st.dropRateLimited.Load(), st.reflectionCapped.Load())
	if float64(sent) > o.ReflectionRatio*float64(recv) || st.reflectionCapped.Load() == 0 || st.dropRateLimited.Load() != 0 {
		t.Fatalf("victim got %d bytes for %d sent by the attacker (ratio %v); capped %d, rate-limited %d",
			sent, recv, o.ReflectionRatio, st.reflectionCapped.Load(), st.dropRateLimited.Load())
	}
}

// floodBurst is n distinct names nobody holds, packed 100 to a datagram
// (so that the name budget binds before the datagram budget).
func floodBurst(n int) [][]byte {
	var out [][]byte
	for i := 0; i < n; i += 100 {
		var names []string
		for j := i; j < min(i+100, n); j++ {
			names = append(names, fmt.Sprintf("flood:%07d", j))
		}
		out = append(out, searchMsg(0, netip.Addr{}, 40000, []string{"tcp"}, names...))
	}
	return out
}

// A flood of new names from one source is held to the name budget
// exactly as before repeats were priced apart: the burst at one instant,
// then the rate; another source is not touched.
func TestDistinctNameFloodLimited(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	o := defaultLimits(Options{AnswerNames: true, Resolver: javaRegistry(10), Clock: clk})
	h, st := testHandler(t, o, &discardSender{})
	first := o.NameBurst/100 + 1000
	flood := floodBurst((first + int(o.NameRate)/100 + 1000) * 100)
	for _, b := range flood[:first] {
		h.handle(broadcastFrom(b, lanC1))
	}
	if st.searchNames.Load() != uint64(o.NameBurst) || st.dropRateLimited.Load() != 1000 {
		t.Fatalf("%d names looked up, %d datagrams limited: want the burst of %d names and no more",
			st.searchNames.Load(), st.dropRateLimited.Load(), o.NameBurst)
	}
	clk.Advance(time.Second)
	names := st.searchNames.Load()
	for _, b := range flood[first:] {
		h.handle(broadcastFrom(b, lanC1))
	}
	limited := st.dropRateLimited.Load()
	if got := st.searchNames.Load() - names; got != uint64(o.NameRate) {
		t.Fatalf("%d names looked up in the next second, want the rate of %v", got, o.NameRate)
	}
	h.handle(broadcastFrom(flood[0], lanC2))
	if st.dropRateLimited.Load() != limited {
		t.Fatal("another source was limited by the flood")
	}
}
