package searchring

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/clock"
	"github.com/pvans-project/pvans/internal/pva"
)

// capacity is how many names of length l fit one ["tcp"] search
// datagram: floor((1400-41)/(5+l)), the C of docs/protocol.md, "Search
// traffic at scale".
func capacity(l int) int {
	return (pva.MaxSearchDatagram - pva.SearchOverhead([]string{"tcp"})) / pva.SearchNameCost(l)
}

// sent is one datagram as the recorder saw it, decoded with the codec.
type sent struct {
	at     time.Duration // since the recorder's start
	size   int
	flags  uint8
	port   uint16
	names  []string
	cids   []uint32
	seq    uint32
	protos []string
}

// recorder is a Transport that decodes and keeps every datagram (or only
// counts them when countOnly is set, for the big simulations).
type recorder struct {
	t         testing.TB
	clk       *clock.Fake
	start     time.Time
	countOnly bool

	mu    sync.Mutex
	count int
	dgs   []sent
	ups   []Upstream
	srch  pva.Search
}

// recorderDest is where the recorder says every datagram went.
var recorderDest = netip.MustParseAddrPort("127.0.0.1:5076")

func (rc *recorder) SendUDP(d []byte, sentTo func(netip.AddrPort, error)) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	sentTo(recorderDest, nil)
	rc.count++
	if rc.countOnly {
		return
	}
	s, err := decodeSearch(d, &rc.srch)
	if err != nil {
		rc.t.Errorf("undecodable datagram: %v", err)
		return
	}
	s.at = rc.clk.Now().Sub(rc.start)
	rc.dgs = append(rc.dgs, s)
}

func (rc *recorder) Upstreams() []Upstream {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.ups
}

func decodeSearch(d []byte, m *pva.Search) (sent, error) {
	h, payload, rest, err := pva.SplitMessage(d)
	if err != nil {
		return sent{}, err
	}
	if h.Command != pva.CmdSearch || !h.BigEndian() || len(rest) != 0 {
		return sent{}, fmt.Errorf("header %+v, %d trailing bytes", h, len(rest))
	}
	if err := m.Decode(payload, true); err != nil {
		return sent{}, err
	}
	s := sent{size: len(d), flags: m.Flags, port: m.ReplyPort, seq: m.Seq}
	for _, p := range m.Protocols {
		s.protos = append(s.protos, string(p))
	}
	for _, n := range m.Names {
		s.names = append(s.names, string(n.Name))
		s.cids = append(s.cids, n.CID)
	}
	return s, nil
}

// times lists when name was searched.
func (rc *recorder) times(name string) []time.Duration {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []time.Duration
	for _, d := range rc.dgs {
		for _, n := range d.names {
			if n == name {
				out = append(out, d.at)
			}
		}
	}
	return out
}

// claim is a positive reply from g for cids, echoing the sequence ID of
// the last datagram that carried cids[0] (what a real server does).
func (rc *recorder) claim(g pva.GUID, proto string, port uint16, cids ...uint32) *pva.SearchResponse {
	m := claim(g, proto, port, cids...)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, d := range rc.dgs {
		if len(cids) > 0 && slices.Contains(d.cids, cids[0]) {
			m.Seq = d.seq
		}
	}
	return m
}

// cidOf finds the CID the ring used for name.
func (rc *recorder) cidOf(t testing.TB, name string) uint32 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, d := range rc.dgs {
		for i, n := range d.names {
			if n == name {
				return d.cids[i]
			}
		}
	}
	t.Fatalf("%q never searched", name)
	return 0
}

func (rc *recorder) datagrams() []sent {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]sent(nil), rc.dgs...)
}

func (rc *recorder) reset() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.dgs = nil
	rc.count = 0
}

func (rc *recorder) sent() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.count
}

// upstream is a fake name-server connection.
type upstream struct {
	addr    netip.AddrPort
	mu      sync.Mutex
	ready   bool
	backlog int
	msgs    [][]byte
}

func (u *upstream) Addr() netip.AddrPort { return u.addr }

func (u *upstream) Ready() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ready
}

func (u *upstream) Backlog() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.backlog
}

func (u *upstream) Send(m []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.msgs = append(u.msgs, bytes.Clone(m))
}

func (u *upstream) got() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([][]byte(nil), u.msgs...)
}

// newTestRing starts a ring on a fake clock with a recording transport.
// opts.Clock and opts.Transport are filled in.
func newTestRing(t testing.TB, opts Options) (*Ring, *clock.Fake, *recorder) {
	t.Helper()
	clk := clock.NewFake(time.Time{})
	rc := &recorder{t: t, clk: clk, start: clk.Now()}
	opts.Clock = clk
	opts.Transport = rc
	if opts.ReplyPort == 0 {
		opts.ReplyPort = 40123
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, clk, rc
}

// pvName gives distinct names of exactly length l.
func pvName(i, l int) string {
	s := fmt.Sprintf("PV:%0*d", l-3, i)
	if len(s) != l {
		panic("name too long for length")
	}
	return s
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func secs(n int) time.Duration { return time.Duration(n) * time.Second }
