package udpsearch

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/testutil"
)

// The golden answers: every CMD_SEARCH datagram of the captures (real
// PVXS, pvAccessCPP and Phoebus core-pva peers, README.md there), fed as
// received to the search port's handler over fixed registries, and the
// bytes pvans sends back, kept in testdata/golden-answers.txt. The file
// was written by the code before the answer-path rewrite (issue 40): the
// same bytes after it are the same answers on the wire. The rewrite
// changed the "edges" answers once, deliberately, where UDP took TCP's
// claim rules (package answer): a zero address or port is not named, a
// registry protocol "" is named "tcp".

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden-answers.txt from this code")

const goldenFile = "testdata/golden-answers.txt"

// The golden servers: one per claim rule. GUIDs spell what they are.
var (
	goldenPlain   = resolver.Endpoint{GUID: goldenGUID("plain"), Addr: netip.MustParseAddrPort("10.0.0.7:5075"), Protocol: "tcp"}
	goldenTLS     = resolver.Endpoint{GUID: goldenGUID("tls-endpoint"), Addr: netip.MustParseAddrPort("10.0.0.8:5075"), TLSPort: 5986, Protocol: "tcp"}
	goldenLoop    = resolver.Endpoint{GUID: goldenGUID("loopback"), Addr: netip.MustParseAddrPort("127.0.0.1:5095"), Protocol: "tcp"}
	goldenZero    = resolver.Endpoint{GUID: goldenGUID("zero-addr"), Addr: netip.MustParseAddrPort("0.0.0.0:5075"), Protocol: "tcp"}
	goldenNoPort  = resolver.Endpoint{GUID: goldenGUID("zero-port"), Addr: netip.MustParseAddrPort("10.0.0.11:0"), Protocol: "tcp"}
	goldenEmpty   = resolver.Endpoint{GUID: goldenGUID("no-protocol"), Addr: netip.MustParseAddrPort("10.0.0.9:5075")}
	goldenTLSOnly = resolver.Endpoint{GUID: goldenGUID("tls-only"), Addr: netip.MustParseAddrPort("10.0.0.10:5986"), Protocol: "tls"}
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
	names map[string]resolver.Endpoint
}{
	{"claims", map[string]resolver.Endpoint{
		"cap:a:mbox1": goldenPlain, "demo": goldenPlain,
		"cap:b:mbox3": goldenTLS, "demo2": goldenTLS,
		"cap:a:mbox2": goldenLoop, "demo3": goldenLoop,
	}},
	{"edges", map[string]resolver.Endpoint{
		"cap:a:mbox1": goldenZero, "demo": goldenZero,
		"cap:b:mbox3": goldenEmpty, "demo2": goldenEmpty,
		"cap:a:mbox2": goldenTLSOnly, "demo3": goldenTLSOnly,
		"cap:c:mbox": goldenNoPort,
	}},
}

// goldenVariant is how a captured search is fed: over which registry,
// with its protocol list as sent or as "tls","tcp" (the TLS choice), and
// from the capture's loopback source or from a host on eth0 (the
// loopback-server rule).
type goldenVariant struct {
	reg    int
	tls    bool
	remote bool
}

func (v goldenVariant) String() string {
	s := goldenRegistries[v.reg].name
	if v.tls {
		s += "+tls"
	}
	if v.remote {
		s += " from 10.0.0.9"
	}
	return s
}

var goldenVariants = []goldenVariant{{0, false, false}, {0, true, false}, {0, false, true}, {1, false, false}, {1, true, false}}

// goldenSearch is one captured CMD_SEARCH datagram.
type goldenSearch struct {
	capture string
	block   testutil.CaptureBlock
	tag     []byte // the CMD_ORIGIN_TAG message before it (a forwarded copy)
	hdr     pva.Header
	s       pva.Search
}

func goldenSearches(t *testing.T) []goldenSearch {
	t.Helper()
	var out []goldenSearch
	for _, f := range []struct{ name, file string }{{"loopback", testutil.CaptureFile}, {"java", testutil.JavaCaptureFile}} {
		for _, b := range testutil.CaptureOf(t, f.file) {
			if b.TCP {
				continue
			}
			hdr, payload, rest, err := pva.SplitMessage(b.Data)
			if err != nil {
				t.Fatalf("%s #%d: %v", f.name, b.N, err)
			}
			var tag []byte
			if hdr.Command == pva.CmdOriginTag {
				tag = b.Data[:len(b.Data)-len(rest)]
				if hdr, payload, _, err = pva.SplitMessage(rest); err != nil {
					t.Fatalf("%s #%d: %v", f.name, b.N, err)
				}
			}
			if hdr.Command != pva.CmdSearch {
				continue
			}
			g := goldenSearch{capture: f.name, block: b, tag: tag, hdr: hdr}
			if err := g.s.Decode(payload, hdr.BigEndian()); err != nil {
				t.Fatalf("%s #%d: %v", f.name, b.N, err)
			}
			// The variants re-encode the search: the codec must give back
			// the captured bytes (the header's version aside).
			if again := g.encode(false); !bytes.Equal(again, b.Data) {
				t.Fatalf("%s #%d re-encoded\n got %x\nwant %x", f.name, b.N, again, b.Data)
			}
			out = append(out, g)
		}
	}
	return out
}

// encode is the datagram as captured, or with the protocol list "tls","tcp".
func (g *goldenSearch) encode(tls bool) []byte {
	s := g.s
	if tls {
		s.Protocols = [][]byte{[]byte("tls"), []byte("tcp")}
	}
	m := pva.AppendSearch(nil, g.hdr.Flags, &s)
	m[1] = g.hdr.Version
	return append(bytes.Clone(g.tag), m...)
}

// describe says what was searched and who holds each name in reg.
func (g *goldenSearch) describe(reg map[string]resolver.Endpoint, tls bool) string {
	protos := g.s.Protocols
	if tls {
		protos = [][]byte{[]byte("tls"), []byte("tcp")}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "UDP %s -> %s", g.block.Src, g.block.Dst)
	if g.tag != nil {
		b.WriteString(" forwarded")
	}
	fmt.Fprintf(&b, ", seq %#x, flags %#02x, reply %v:%d, protocols %q;", g.s.Seq, g.s.Flags, g.s.ReplyAddr, g.s.ReplyPort, protos)
	if len(g.s.Names) == 0 {
		b.WriteString(" no names (discovery ping)")
	}
	for _, n := range g.s.Names {
		fmt.Fprintf(&b, " %#x %s=%s", n.CID, n.Name, goldenHolder(reg, string(n.Name)))
	}
	return b.String()
}

func goldenHolder(reg map[string]resolver.Endpoint, name string) string {
	ep, ok := reg[name]
	if !ok {
		return "unheld"
	}
	return string(bytes.TrimRight(ep.GUID[:], "\x00"))
}

// goldenResolver is a fixed registry: one group per server, in the order
// the names are searched.
type goldenResolver map[string]resolver.Endpoint

func (r goldenResolver) Lookup(q []pva.SearchName, b *resolver.Batch) {
	b.Groups, b.Missing = b.Groups[:0], b.Missing[:0]
	for i, n := range q {
		ep, ok := r[string(n.Name)]
		if !ok {
			b.Missing = append(b.Missing, i)
			continue
		}
		g := slices.IndexFunc(b.Groups, func(g resolver.Group) bool { return g.Server == ep })
		if g < 0 {
			b.Groups = append(b.Groups, resolver.Group{Server: ep})
			g = len(b.Groups) - 1
		}
		b.Groups[g].CIDs = append(b.Groups[g].CIDs, n.CID)
	}
}

// TestGoldenAnswers feeds every captured search to a fresh handler per
// variant and compares what it sends with the golden file byte for byte;
// the answers over the realistic registry are checked as each peer would
// read them (goldenAccepted).
func TestGoldenAnswers(t *testing.T) {
	var text strings.Builder
	text.WriteString("# pvans's UDP answers to every CMD_SEARCH datagram of the captures\n" +
		"# (internal/pva/testdata/captures), written by TestGoldenAnswers -update:\n" +
		"# per captured search and variant (registry claims|edges, +tls: protocols\n" +
		"# \"tls\",\"tcp\", from 10.0.0.9: the same bytes from a host on eth0),\n" +
		"# each reply (destination, source address, interface, hex) and forward.\n\n")
	searches := goldenSearches(t)
	entries := 0
	for i := range searches {
		g := &searches[i]
		for _, v := range goldenVariants {
			if (v.remote && g.tag != nil) || (v.tls && len(g.s.Names) == 0) {
				// A forwarded copy comes from this host's loopback; a
				// discovery ping given protocols would be no ping.
				continue
			}
			reg := goldenRegistries[v.reg].names
			out := goldenFeed(t, g, v)
			fmt.Fprintf(&text, "# %s #%d %v: %s\n", g.capture, g.block.N, v, g.describe(reg, v.tls))
			if len(out.replies)+len(out.forwards) == 0 {
				text.WriteString("nothing sent\n")
			}
			for _, r := range out.replies {
				fmt.Fprintf(&text, "reply to %v from %v if %d: %x\n", r.to, r.from, r.ifIndex, r.b)
			}
			for _, f := range out.forwards {
				fmt.Fprintf(&text, "forward: %x\n", f)
			}
			text.WriteString("\n")
			entries++
			if v.reg == 0 {
				goldenAccepted(t, g, v, reg, out.replies)
			}
		}
	}
	if len(searches) != 11 || entries != 48 {
		t.Errorf("%d searches, %d entries: the captures changed (README.md), check the cases", len(searches), entries)
	}
	testutil.Golden(t, goldenFile, text.String(), *updateGolden)
}

// goldenFeed hands one captured datagram to a handler holding v's
// registry, as the search port received it (capture addresses, arrival on
// lo) or from a client on eth0, and returns what it sent.
func goldenFeed(t *testing.T, g *goldenSearch, v goldenVariant) *recSender {
	t.Helper()
	out := &recSender{}
	res := goldenResolver(goldenRegistries[v.reg].names)
	h, _ := testHandler(t, Options{AnswerNames: true, Resolver: res, GUID: goldenOwn, TCPPort: 5075}, out)
	src := netip.MustParseAddrPort(g.block.Src)
	d := &datagram{b: g.encode(v.tls), src: src, dst: netip.MustParseAddrPort(g.block.Dst).Addr(), ifIndex: 1}
	if v.remote {
		d.src, d.dst, d.ifIndex = netip.AddrPortFrom(netip.MustParseAddr("10.0.0.9"), src.Port()), ipEth, 2
	}
	h.handle(d)
	return out
}

// goldenAccepted checks the replies to g as its peer reads them: one
// big-endian server message each (PVXS and core-pva read UDP replies by
// their own byte-order flag; pvans answers as PVXS does), sent where the
// search asked, echoing its sequence and only its CIDs, every held name
// answered once in a protocol it listed at a usable port, and found=0 only
// as pvans's own answer to a MustReply search.
func goldenAccepted(t *testing.T, g *goldenSearch, v goldenVariant, reg map[string]resolver.Endpoint, replies []sentReply) {
	t.Helper()
	at := fmt.Sprintf("%s #%d %v", g.capture, g.block.N, v)
	s := &g.s
	s2 := *s
	if v.tls {
		s2.Protocols = [][]byte{[]byte("tls"), []byte("tcp")}
	}
	to := s.ReplyAddr.Addr()
	if s.ReplyAddr.IsAny() {
		to = netip.MustParseAddrPort(g.block.Src).Addr()
		if v.remote {
			to = netip.MustParseAddr("10.0.0.9")
		}
	}
	wantDest := netip.AddrPortFrom(to, s.ReplyPort)
	want := map[uint32]bool{}
	for _, n := range s.Names {
		if _, ok := reg[string(n.Name)]; ok {
			want[n.CID] = true
		}
	}
	got := map[uint32]bool{}
	negative := 0
	for _, r := range replies {
		h, p, rest, err := pva.SplitMessage(r.b)
		if err != nil || len(rest) != 0 || h.Command != pva.CmdSearchResponse || h.Control() || h.Segment() != 0 {
			t.Errorf("%s: not one CMD_SEARCH_RESPONSE: %x (%v)", at, r.b, err)
			continue
		}
		if !h.BigEndian() || !h.FromServer() {
			t.Errorf("%s: header flags %#02x, want big endian from a server", at, h.Flags)
		}
		if r.to != wantDest {
			t.Errorf("%s: reply to %v, the search asked for %v", at, r.to, wantDest)
		}
		var m pva.SearchResponse
		if err := m.Decode(p, true); err != nil {
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
		if m.Port == 0 || !s2.HasProtocol(string(m.Protocol)) || len(m.CIDs) == 0 {
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
