package tcpsearch

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/testutil"
)

// The golden answers: every CMD_SEARCH a client sent over TCP in the
// captures (PVXS pvxget, Phoebus core-pva, the crafted client; README.md
// there), replayed on a real loopback connection to the listener over
// fixed registries, each connection as its peer opened it (its own
// validation message, its searches in order), and the bytes pvans sends
// back, kept in testdata/golden-answers.txt. The file was written by the
// code before the answer-path rewrite (issue 40): the same bytes after it
// are the same answers on the wire. internal/udpsearch's golden_test.go
// is the UDP half, over the same registries.

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden-answers.txt from this code")

const goldenFile = "testdata/golden-answers.txt"

// The golden servers (as in internal/udpsearch's golden_test.go): one per
// claim rule. GUIDs spell what they are.
var (
	goldenPlain   = Endpoint{GUID: goldenGUID("plain"), Addr: netip.MustParseAddrPort("10.0.0.7:5075"), Protocol: "tcp"}
	goldenTLS     = Endpoint{GUID: goldenGUID("tls-endpoint"), Addr: netip.MustParseAddrPort("10.0.0.8:5075"), TLSPort: 5986, Protocol: "tcp"}
	goldenLoop    = Endpoint{GUID: goldenGUID("loopback"), Addr: netip.MustParseAddrPort("127.0.0.1:5095"), Protocol: "tcp"}
	goldenZero    = Endpoint{GUID: goldenGUID("zero-addr"), Addr: netip.MustParseAddrPort("0.0.0.0:5075"), Protocol: "tcp"}
	goldenNoPort  = Endpoint{GUID: goldenGUID("zero-port"), Addr: netip.MustParseAddrPort("10.0.0.11:0"), Protocol: "tcp"}
	goldenEmpty   = Endpoint{GUID: goldenGUID("no-protocol"), Addr: netip.MustParseAddrPort("10.0.0.9:5075")}
	goldenTLSOnly = Endpoint{GUID: goldenGUID("tls-only"), Addr: netip.MustParseAddrPort("10.0.0.10:5986"), Protocol: "tls"}
	goldenOwn     = goldenGUID("pvans")
)

func goldenGUID(s string) (g pva.GUID) {
	copy(g[:], s)
	return g
}

// goldenRegistries: "claims" holds the captures' names at realistic
// servers (a plain one, one with a TLS endpoint, one known by loopback)
// and leaves cap:c:mbox unheld; "edges" holds them at the registry
// entries the two answer paths used to disagree on.
var goldenRegistries = []struct {
	name  string
	names map[string]Endpoint
}{
	{"claims", map[string]Endpoint{
		"cap:a:mbox1": goldenPlain, "demo": goldenPlain,
		"cap:b:mbox3": goldenTLS, "demo2": goldenTLS,
		"cap:a:mbox2": goldenLoop, "demo3": goldenLoop,
	}},
	{"edges", map[string]Endpoint{
		"cap:a:mbox1": goldenZero, "demo": goldenZero,
		"cap:b:mbox3": goldenEmpty, "demo2": goldenEmpty,
		"cap:a:mbox2": goldenTLSOnly, "demo3": goldenTLSOnly,
		"cap:c:mbox": goldenNoPort,
	}},
}

// goldenSeqEnd is the sequence of the discovery ping sent after each
// captured search: its answer marks the end of the search's.
const goldenSeqEnd = 0x60_1d_e0_00

// goldenResolver is a fixed registry: one group per server, in the order
// the names are searched; nothing is waited for.
type goldenResolver map[string]Endpoint

func (r goldenResolver) Lookup(q []pva.SearchName, b *Batch) {
	b.Groups, b.Missing = b.Groups[:0], b.Missing[:0]
	for i, n := range q {
		ep, ok := r[string(n.Name)]
		if !ok {
			b.Missing = append(b.Missing, i)
			continue
		}
		g := slices.IndexFunc(b.Groups, func(g Group) bool { return g.Server == ep })
		if g < 0 {
			b.Groups = append(b.Groups, Group{Server: ep})
			g = len(b.Groups) - 1
		}
		b.Groups[g].CIDs = append(b.Groups[g].CIDs, n.CID)
	}
}

func (r goldenResolver) NewClient(netip.Addr, func(Group)) Waiter { return goldenWaiter{} }

type goldenWaiter struct{}

func (goldenWaiter) Wait([]pva.SearchName, []int, Offer)       {}
func (goldenWaiter) Told([]pva.SearchName, *Batch, int, Offer) {}
func (goldenWaiter) Close()                                    {}

// goldenConn is one captured client connection: its validation message
// and the blocks holding its searches.
type goldenConn struct {
	capture    string
	src        string
	validation []byte
	searches   []goldenBlock
}

type goldenBlock struct {
	n    int
	hdr  pva.Header
	s    pva.Search
	data []byte
}

// encode is the block as captured, or its search with the protocol list
// "tls","tcp".
func (b *goldenBlock) encode(tls bool) []byte {
	if !tls {
		return b.data
	}
	s := b.s
	s.Protocols = [][]byte{[]byte("tls"), []byte("tcp")}
	m := pva.AppendSearch(nil, b.hdr.Flags, &s)
	m[1] = b.hdr.Version
	return m
}

func goldenConns(t *testing.T) []*goldenConn {
	t.Helper()
	var out []*goldenConn
	for _, f := range []struct{ name, file string }{{"loopback", testutil.CaptureFile}, {"java", testutil.JavaCaptureFile}} {
		byPeer := map[string]*goldenConn{}
		for _, b := range testutil.CaptureOf(t, f.file) {
			if !b.TCP {
				continue
			}
			hdr, payload, rest, err := pva.SplitMessage(b.Data)
			if err != nil || hdr.FromServer() || hdr.Control() {
				continue // a server's, a control message or a segment's tail
			}
			c := byPeer[b.Src]
			switch {
			case hdr.Command == pva.CmdConnectionValidation && c == nil:
				c = &goldenConn{capture: f.name, src: b.Src, validation: b.Data[:len(b.Data)-len(rest)]}
				byPeer[b.Src] = c
			case hdr.Command == pva.CmdSearch:
				if c == nil || len(rest) != 0 {
					t.Fatalf("%s #%d: a search before validation, or with more in its segment", f.name, b.N)
				}
				g := goldenBlock{n: b.N, hdr: hdr, data: b.Data}
				if err := g.s.Decode(payload, hdr.BigEndian()); err != nil {
					t.Fatalf("%s #%d: %v", f.name, b.N, err)
				}
				// The +tls variant re-encodes the search: the codec must
				// give back the captured bytes (the header's version aside).
				s := g.s
				if m := pva.AppendSearch(nil, hdr.Flags, &s); !bytes.Equal(m[2:], b.Data[2:]) || m[0] != b.Data[0] {
					t.Fatalf("%s #%d re-encoded\n got %x\nwant %x", f.name, b.N, m, b.Data)
				}
				c.searches = append(c.searches, g)
			}
		}
		for _, b := range testutil.CaptureOf(t, f.file) {
			if c := byPeer[b.Src]; c != nil && len(c.searches) > 0 && !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// TestGoldenAnswers replays every captured TCP connection that searched,
// once per registry and protocol list, and compares what pvans answers
// each search with the golden file byte for byte; the answers over the
// realistic registry are checked as each peer would read them
// (goldenAccepted).
func TestGoldenAnswers(t *testing.T) {
	var text strings.Builder
	text.WriteString("# pvans's TCP answers to every CMD_SEARCH a client sent over TCP in the\n" +
		"# captures (internal/pva/testdata/captures), written by TestGoldenAnswers\n" +
		"# -update: per captured search and variant (registry claims|edges, +tls:\n" +
		"# protocols \"tls\",\"tcp\"), each message pvans sent back, in hex, on a\n" +
		"# connection replaying the peer's (its validation, its searches in order).\n\n")
	conns := goldenConns(t)
	searches, entries := 0, 0
	for _, c := range conns {
		searches += len(c.searches)
	}
	for reg := range goldenRegistries {
		srv := New(Options{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}, GUID: goldenOwn},
			goldenResolver(goldenRegistries[reg].names))
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		for _, tls := range []bool{false, true} {
			name := goldenRegistries[reg].name
			if tls {
				name += "+tls"
			}
			for _, c := range conns {
				for i, answers := range goldenReplay(t, srv.Addrs()[0], c, tls) {
					b := &c.searches[i]
					fmt.Fprintf(&text, "# %s #%d %s: %s\n", c.capture, b.n, name, goldenDescribe(c, b, goldenRegistries[reg].names, tls))
					if len(answers.msgs) == 0 {
						text.WriteString("nothing sent\n")
					}
					for _, m := range answers.msgs {
						fmt.Fprintf(&text, "%x\n", m)
					}
					text.WriteString("\n")
					entries++
					if reg == 0 {
						goldenAccepted(t, fmt.Sprintf("%s #%d %s", c.capture, b.n, name), b, tls, answers)
					}
				}
			}
		}
		srv.Close()
	}
	if len(conns) != 3 || searches != 9 || entries != 36 {
		t.Errorf("%d connections, %d searches, %d entries: the captures changed (README.md), check the cases", len(conns), searches, entries)
	}
	testutil.Golden(t, goldenFile, text.String(), *updateGolden)
}

func goldenDescribe(c *goldenConn, b *goldenBlock, reg map[string]Endpoint, tls bool) string {
	protos := b.s.Protocols
	if tls {
		protos = [][]byte{[]byte("tls"), []byte("tcp")}
	}
	order := "little"
	if b.hdr.BigEndian() {
		order = "big"
	}
	var s strings.Builder
	fmt.Fprintf(&s, "TCP from %s, %s endian, seq %#x, flags %#02x, reply %v:%d, protocols %q;",
		c.src, order, b.s.Seq, b.s.Flags, b.s.ReplyAddr, b.s.ReplyPort, protos)
	for _, n := range b.s.Names {
		holder := "unheld"
		if ep, ok := reg[string(n.Name)]; ok {
			holder = string(bytes.TrimRight(ep.GUID[:], "\x00"))
		}
		fmt.Fprintf(&s, " %#x %s=%s", n.CID, n.Name, holder)
	}
	return s.String()
}

// goldenAnswers is what pvans sent after one search, before the answer
// to the ping that follows it, and the connection's byte order.
type goldenAnswers struct {
	msgs      [][]byte
	bigEndian bool
}

// goldenReplay opens a connection to ep as c's peer did (the peer's own
// validation message) and sends its searches in order, each followed by a
// discovery ping whose answer ends the search's answers.
func goldenReplay(t *testing.T, ep netip.AddrPort, c *goldenConn, tls bool) []goldenAnswers {
	t.Helper()
	nc, err := net.Dial("tcp", ep.String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// Only a hung connection fails on this: nothing here is timed.
	nc.SetDeadline(time.Now().Add(time.Minute))
	big := false
	for {
		h, _ := goldenRead(t, nc)
		if h.Control() && h.Command == pva.CtrlSetByteOrder {
			big = h.BigEndian()
		}
		if !h.Control() && h.Command == pva.CmdConnectionValidation {
			break
		}
	}
	nc.Write(c.validation)
	for {
		if h, _ := goldenRead(t, nc); !h.Control() && h.Command == pva.CmdConnectionValidated {
			break
		}
	}
	var out []goldenAnswers
	for i := range c.searches {
		b := &c.searches[i]
		end := pva.Search{Seq: goldenSeqEnd, Flags: pva.SearchMustReply}
		nc.Write(append(b.encode(tls), pva.AppendSearch(nil, b.hdr.Flags, &end)...))
		a := goldenAnswers{bigEndian: big}
		for {
			h, p := goldenRead(t, nc)
			if h.Control() {
				continue
			}
			var m pva.SearchResponse
			if h.Command == pva.CmdSearchResponse && m.Decode(p, h.BigEndian()) == nil && m.Seq == goldenSeqEnd && m.GUID == goldenOwn {
				break
			}
			a.msgs = append(a.msgs, append(pva.AppendHeader(nil, h), p...))
		}
		out = append(out, a)
	}
	return out
}

// goldenRead reads one message: its header and payload.
func goldenRead(t *testing.T, nc net.Conn) (pva.Header, []byte) {
	t.Helper()
	hb := make([]byte, pva.HeaderSize)
	if _, err := io.ReadFull(nc, hb); err != nil {
		t.Fatalf("reading a header: %v", err)
	}
	h, err := pva.DecodeHeader(hb)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, h.PayloadLen())
	if _, err := io.ReadFull(nc, p); err != nil {
		t.Fatalf("reading a payload: %v", err)
	}
	return h, p
}

// goldenAccepted checks the answers to b as its peer reads them: each a
// server's CMD_SEARCH_RESPONSE in the connection's byte order (what PVXS
// and core-pva decode a TCP message by), echoing the search's sequence
// (core-pva's "kool" included) and only its CIDs, every held name
// answered once in a protocol it listed at a usable port (core-pva
// connects to the port named, and fails on 0), and found=0 only as
// pvans's own answer to a MustReply search.
func goldenAccepted(t *testing.T, at string, b *goldenBlock, tls bool, a goldenAnswers) {
	t.Helper()
	s := b.s
	if tls {
		s.Protocols = [][]byte{[]byte("tls"), []byte("tcp")}
	}
	want := map[uint32]bool{}
	for _, n := range s.Names {
		if _, ok := goldenRegistries[0].names[string(n.Name)]; ok {
			want[n.CID] = true
		}
	}
	got := map[uint32]bool{}
	negative := 0
	for _, raw := range a.msgs {
		h, p, rest, err := pva.SplitMessage(raw)
		if err != nil || len(rest) != 0 || h.Command != pva.CmdSearchResponse {
			t.Errorf("%s: not a CMD_SEARCH_RESPONSE: %x (%v)", at, raw, err)
			continue
		}
		if h.BigEndian() != a.bigEndian || !h.FromServer() {
			t.Errorf("%s: header flags %#02x; the connection is big endian: %v", at, h.Flags, a.bigEndian)
		}
		var m pva.SearchResponse
		if err := m.Decode(p, a.bigEndian); err != nil {
			t.Errorf("%s: %v", at, err)
			continue
		}
		if m.Seq != s.Seq {
			t.Errorf("%s: sequence %#x, the search's is %#x", at, m.Seq, s.Seq)
		}
		if !m.Found {
			negative++
			if len(m.CIDs) != 0 || m.GUID != goldenOwn || !s.MustReply() {
				t.Errorf("%s: a found=0 reply %+v", at, m)
			}
			continue
		}
		if m.Port == 0 || !s.HasProtocol(string(m.Protocol)) || len(m.CIDs) == 0 {
			t.Errorf("%s: a reply a client cannot use: port %d, protocol %q, CIDs %v", at, m.Port, m.Protocol, m.CIDs)
		}
		for _, c := range m.CIDs {
			if !want[c] || got[c] {
				t.Errorf("%s: CID %#x answered but not held, not searched or twice", at, c)
			}
			got[c] = true
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: CIDs %v answered, want %v", at, got, want)
	}
	if wantNeg := len(want) == 0 && s.MustReply(); (negative == 1) != wantNeg || negative > 1 {
		t.Errorf("%s: %d found=0 replies (MustReply %v, held %d)", at, negative, s.MustReply(), len(want))
	}
}
