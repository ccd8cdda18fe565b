package udpsearch

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/internal/testutil/goldenanswers"
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
	s := goldenanswers.Registries[v.reg].Name
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
	for _, f := range goldenanswers.Captures {
		for _, b := range testutil.CaptureOf(t, f.File) {
			if b.TCP {
				continue
			}
			hdr, payload, rest, err := pva.SplitMessage(b.Data)
			if err != nil {
				t.Fatalf("%s #%d: %v", f.Name, b.N, err)
			}
			var tag []byte
			if hdr.Command == pva.CmdOriginTag {
				tag = b.Data[:len(b.Data)-len(rest)]
				if hdr, payload, _, err = pva.SplitMessage(rest); err != nil {
					t.Fatalf("%s #%d: %v", f.Name, b.N, err)
				}
			}
			if hdr.Command != pva.CmdSearch {
				continue
			}
			g := goldenSearch{capture: f.Name, block: b, tag: tag, hdr: hdr}
			if err := g.s.Decode(payload, hdr.BigEndian()); err != nil {
				t.Fatalf("%s #%d: %v", f.Name, b.N, err)
			}
			// The variants re-encode the search: the codec must give back
			// the captured bytes (the header's version aside).
			if again := g.encode(false); !bytes.Equal(again, b.Data) {
				t.Fatalf("%s #%d re-encoded\n got %x\nwant %x", f.Name, b.N, again, b.Data)
			}
			out = append(out, g)
		}
	}
	return out
}

// encode is the datagram as captured, or with the protocol list "tls","tcp".
func (g *goldenSearch) encode(tls bool) []byte {
	s := goldenanswers.Variant(g.s, tls)
	return append(bytes.Clone(g.tag), goldenanswers.Encode(g.hdr, &s)...)
}

// describe says what was searched and who holds each name in reg.
func (g *goldenSearch) describe(reg goldenanswers.Resolver, tls bool) string {
	forwarded := ""
	if g.tag != nil {
		forwarded = " forwarded"
	}
	s := goldenanswers.Variant(g.s, tls)
	return fmt.Sprintf("UDP %s -> %s%s, %s", g.block.Src, g.block.Dst, forwarded, goldenanswers.Describe(&s, reg))
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
			reg := goldenanswers.Registries[v.reg].Names
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
	res := goldenanswers.Registries[v.reg].Names
	h, _ := testHandler(t, Options{AnswerNames: true, Resolver: res, GUID: goldenanswers.Own, TCPPort: 5075}, out)
	src := netip.MustParseAddrPort(g.block.Src)
	d := &datagram{b: g.encode(v.tls), src: src, dst: netip.MustParseAddrPort(g.block.Dst).Addr(), ifIndex: 1}
	if v.remote {
		d.src, d.dst, d.ifIndex = netip.AddrPortFrom(netip.MustParseAddr("10.0.0.9"), src.Port()), ipEth, 2
	}
	h.handle(d)
	return out
}

// goldenAccepted checks the replies to g as its peer reads them
// (goldenanswers.Accepted): sent where the search asked, each one
// big-endian message (PVXS and core-pva read UDP replies by their own
// byte-order flag; pvans answers as PVXS does).
func goldenAccepted(t *testing.T, g *goldenSearch, v goldenVariant, reg goldenanswers.Resolver, replies []sentReply) {
	t.Helper()
	at := fmt.Sprintf("%s #%d %v", g.capture, g.block.N, v)
	s := goldenanswers.Variant(g.s, v.tls)
	to := s.ReplyAddr.Addr()
	if s.ReplyAddr.IsAny() {
		to = netip.MustParseAddrPort(g.block.Src).Addr()
		if v.remote {
			to = netip.MustParseAddr("10.0.0.9")
		}
	}
	wantDest := netip.AddrPortFrom(to, s.ReplyPort)
	var msgs [][]byte
	for _, r := range replies {
		if r.to != wantDest {
			t.Errorf("%s: reply to %v, the search asked for %v", at, r.to, wantDest)
		}
		msgs = append(msgs, r.b)
	}
	goldenanswers.Accepted(t, at, &s, reg, msgs, true)
}
