package tcpsearch

import (
	"fmt"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/config"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/testutil"
)

const javaChannels = 1000

func javaName(i int) string { return fmt.Sprintf("SIM:ioc%02d:ai%05d:val", i%10, i) }

// javaBurst is a Phoebus (core-pva) client opening n channels one by
// one over its name-server connection: each open starts a search round
// of every channel not yet connected, and none connects before the last
// is opened (the worst case). A round is packed as
// ChannelSearch.runSearches packs it (each message's names under 1,390
// bytes), with core-pva's TCP sequence "look", little endian here ("kool"
// on the wire).
func javaBurst(n int) [][]byte {
	const maxPayload = 1440 - 50
	var out [][]byte
	for round := 1; round <= n; round++ {
		s := &pva.Search{Seq: 0x6C6F6F6B, Flags: pva.SearchUnicast, Protocols: [][]byte{[]byte("tcp")}}
		size := 0
		for i := range round {
			name := javaName(i)
			if len(s.Names) > 0 && size+4+1+len(name) >= maxPayload {
				out = append(out, pva.AppendSearch(nil, 0, s))
				s.Names, size = s.Names[:0], 0
			}
			s.Names = append(s.Names, pva.SearchName{CID: uint32(i + 1), Name: []byte(name)})
			size += 4 + 1 + len(name)
		}
		out = append(out, pva.AppendSearch(nil, 0, s))
	}
	return out
}

// The Java client's start-up burst over its name-server connection at
// the default limits: ~10,000 messages at one instant of the (fake)
// clock, five times the default message burst, every one but the last
// name of each round a repeat; none is rate-limited and every channel is
// answered. Before repeats were priced apart, every message past the
// burst of 2,000 was dropped.
func TestJavaBurstNotLimitedAtDefaults(t *testing.T) {
	d := config.Defaults().RateLimit
	w := newWorld(t, Options{MessageRate: d.TCPMessagesPerSecond, MessageBurst: int(d.TCPMessagesPerSecond) * BurstSeconds,
		Clock: clock.NewFake(time.Time{})})
	var names []string
	for i := range javaChannels {
		names = append(names, javaName(i))
	}
	w.addServer(t, guidA, epA, names...)
	cl := dial(t, w.ep)
	burst := javaBurst(javaChannels)
	go func() {
		for _, m := range burst {
			if cl.c.Send(m) != nil {
				return
			}
		}
	}()
	claimed := map[uint32]bool{}
	testutil.WaitFor(t, 60*time.Second, "the burst to be handled", func() bool {
		for {
			select {
			case r := <-cl.resps:
				for _, c := range r.m.CIDs {
					claimed[c] = true
				}
				continue
			default:
			}
			return w.srv.cnt.searches.Load()+w.srv.cnt.rateLimited.Load() == uint64(len(burst)) && (w.srv.cnt.rateLimited.Load() > 0 || len(claimed) == javaChannels)
		}
	})
	t.Logf("%d messages, %d names; rate-limited %d; %d of %d channels answered", len(burst), w.srv.cnt.names.Load(), w.srv.cnt.rateLimited.Load(),
		len(claimed), javaChannels)
	if w.srv.cnt.rateLimited.Load() != 0 || len(claimed) != javaChannels {
		t.Fatalf("rate-limited %d of %d messages; %d of %d channels answered", w.srv.cnt.rateLimited.Load(), len(burst), len(claimed), javaChannels)
	}
}

// A flood of messages naming new names is held to the message budget as
// before: the burst at one instant, the rate after.
func TestDistinctNameFloodLimited(t *testing.T) {
	d := config.Defaults().RateLimit
	burst := int(d.TCPMessagesPerSecond) * BurstSeconds
	clk := clock.NewFake(time.Time{})
	w := newWorld(t, Options{MessageRate: d.TCPMessagesPerSecond, MessageBurst: int(d.TCPMessagesPerSecond) * BurstSeconds, Clock: clk})
	cl := dial(t, w.ep)
	msg := func(i int) []byte {
		var ns []string
		for j := range 38 {
			ns = append(ns, fmt.Sprintf("flood:%02d-XX:Dev%07d}Val-I", j, 38*i+j))
		}
		return searchMsg(uint32(i), ns...)
	}
	first := burst + 500
	send := func(from, to int) {
		for i := from; i < to; i++ {
			if cl.c.Send(msg(i)) != nil {
				t.Fatal("send")
			}
		}
		testutil.WaitFor(t, 60*time.Second, "the flood to be handled", func() bool {
			return w.srv.cnt.searches.Load()+w.srv.cnt.rateLimited.Load() == uint64(to)
		})
	}
	send(0, first)
	if w.srv.cnt.searches.Load() != uint64(burst) {
		t.Fatalf("%d of %d messages of new names handled at one instant, want the burst of %d", w.srv.cnt.searches.Load(), first,
			burst)
	}
	clk.Advance(time.Second)
	send(first, first+int(d.TCPMessagesPerSecond)+500)
	if w.srv.cnt.searches.Load() != uint64(burst)+uint64(d.TCPMessagesPerSecond) {
		t.Fatalf("%d messages handled after 1 s, want the burst and the rate (%d)", w.srv.cnt.searches.Load(),
			burst+int(d.TCPMessagesPerSecond))
	}
}
