package udpsearch

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	ipLo    = netip.MustParseAddr("127.0.0.1")
	ipEth   = netip.MustParseAddr("10.0.0.5")
	ipEthBc = netip.MustParseAddr("10.0.0.255")
	ipEth2  = netip.MustParseAddr("10.1.0.5")
	ownGUID = pva.GUID{0xAA, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
)

// testInterfaces is a host with loopback (1) and two LANs (2, 3).
func testInterfaces() []Interface {
	return []Interface{
		{Index: 1, Name: "lo", Up: true, Loopback: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
		{Index: 2, Name: "eth0", Up: true, Broadcast: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/24")}},
		{Index: 3, Name: "eth1", Up: true, Broadcast: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.1.0.5/24")}},
	}
}

// mapResolver is a registry of name → server, grouping like the real
// resolver and reusing the batch so it allocates nothing in steady state.
type mapResolver struct {
	mu    sync.Mutex
	names map[string]resolver.Endpoint
}

func newMapResolver(kv map[string]resolver.Endpoint) *mapResolver { return &mapResolver{names: kv} }

func (r *mapResolver) Lookup(q []pva.SearchName, b *resolver.Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b.Groups, b.Missing = b.Groups[:0], b.Missing[:0]
	for i, n := range q {
		ep, ok := r.names[string(n.Name)]
		if !ok {
			b.Missing = append(b.Missing, i)
			continue
		}
		g := -1
		for j := range b.Groups {
			if b.Groups[j].Server == ep {
				g = j
				break
			}
		}
		if g < 0 {
			g = len(b.Groups)
			if g < cap(b.Groups) {
				b.Groups = b.Groups[:g+1]
				b.Groups[g].CIDs = b.Groups[g].CIDs[:0]
			} else {
				b.Groups = append(b.Groups, resolver.Group{})
			}
			b.Groups[g].Server = ep
		}
		b.Groups[g].CIDs = append(b.Groups[g].CIDs, n.CID)
	}
}

type sentReply struct {
	b       []byte
	to      netip.AddrPort
	from    netip.Addr
	ifIndex int
}

// recSender records what the handler sends.
type recSender struct {
	replies  []sentReply
	forwards [][]byte
}

func (s *recSender) reply(b []byte, to netip.AddrPort, from netip.Addr, ifIndex int) {
	s.replies = append(s.replies, sentReply{bytes.Clone(b), to, from, ifIndex})
}
func (s *recSender) forward(b []byte) { s.forwards = append(s.forwards, bytes.Clone(b)) }
func (s *recSender) reset()           { s.replies, s.forwards = nil, nil }

// discardSender sends nothing (benchmarks, fuzzing at speed).
type discardSender struct{ replies, forwards int }

func (s *discardSender) reply([]byte, netip.AddrPort, netip.Addr, int) { s.replies++ }
func (s *discardSender) forward([]byte)                                { s.forwards++ }

type obsSink struct {
	mu  sync.Mutex
	obs []beacon.Observation
}

func (s *obsSink) Observe(o beacon.Observation) {
	s.mu.Lock()
	s.obs = append(s.obs, o)
	s.mu.Unlock()
}

func (s *obsSink) all() []beacon.Observation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]beacon.Observation(nil), s.obs...)
}

// testHandler builds a socketless handler over testInterfaces.
func testHandler(t testing.TB, o Options, out sender) (*handler, *counters) {
	t.Helper()
	o.setDefaults()
	st := &counters{}
	var ifs atomic.Pointer[ifaceTable]
	ifs.Store(newIfaceTable(testInterfaces()))
	h := newHandler(&o, st, &ifs, out)
	return h, st
}

func searchMsg(flags uint8, reply netip.Addr, port uint16, protos []string, names ...string) []byte {
	s := &pva.Search{Seq: pva.SearchSeqFind, Flags: flags, ReplyAddr: pva.AddressFrom(reply), ReplyPort: port}
	for _, p := range protos {
		s.Protocols = append(s.Protocols, []byte(p))
	}
	for i, n := range names {
		s.Names = append(s.Names, pva.SearchName{CID: 0x12345678 + uint32(i), Name: []byte(n)})
	}
	return pva.AppendSearch(nil, pva.FlagBigEndian, s)
}

func decodeResponse(t testing.TB, b []byte) (pva.Header, *pva.SearchResponse) {
	t.Helper()
	h, p, rest, err := pva.SplitMessage(b)
	if err != nil || len(rest) != 0 || h.Command != pva.CmdSearchResponse {
		t.Fatalf("not one search response: %x (%v)", b, err)
	}
	m := &pva.SearchResponse{}
	if err := m.Decode(p, h.BigEndian()); err != nil {
		t.Fatal(err)
	}
	return h, m
}
