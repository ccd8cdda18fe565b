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
	"github.com/pvans-project/pvans/internal/testutil/goldenanswers"
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

// goldenSeqEnd is the sequence of the discovery ping sent after each
// captured search: its answer marks the end of the search's.
const goldenSeqEnd = 0x60_1d_e0_00

// goldenResolver is a fixed registry (goldenanswers.Resolver) whose
// clients wait for nothing.
type goldenResolver struct{ goldenanswers.Resolver }

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
	s := goldenanswers.Variant(b.s, true)
	return goldenanswers.Encode(b.hdr, &s)
}

func goldenConns(t *testing.T) []*goldenConn {
	t.Helper()
	var out []*goldenConn
	for _, f := range goldenanswers.Captures {
		byPeer := map[string]*goldenConn{}
		for _, b := range testutil.CaptureOf(t, f.File) {
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
				c = &goldenConn{capture: f.Name, src: b.Src, validation: b.Data[:len(b.Data)-len(rest)]}
				byPeer[b.Src] = c
			case hdr.Command == pva.CmdSearch:
				if c == nil || len(rest) != 0 {
					t.Fatalf("%s #%d: a search before validation, or with more in its segment", f.Name, b.N)
				}
				g := goldenBlock{n: b.N, hdr: hdr, data: b.Data}
				if err := g.s.Decode(payload, hdr.BigEndian()); err != nil {
					t.Fatalf("%s #%d: %v", f.Name, b.N, err)
				}
				// The +tls variant re-encodes the search: the codec must
				// give back the captured bytes (the header's version aside).
				if m := goldenanswers.Encode(hdr, &g.s); !bytes.Equal(m, b.Data) {
					t.Fatalf("%s #%d re-encoded\n got %x\nwant %x", f.Name, b.N, m, b.Data)
				}
				c.searches = append(c.searches, g)
			}
		}
		for _, b := range testutil.CaptureOf(t, f.File) {
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
// (goldenanswers.Accepted).
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
	for reg, r := range goldenanswers.Registries {
		srv := New(Options{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}, GUID: goldenanswers.Own},
			goldenResolver{r.Names})
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		for _, tls := range []bool{false, true} {
			name := r.Name
			if tls {
				name += "+tls"
			}
			for _, c := range conns {
				for i, answers := range goldenReplay(t, srv.Addrs()[0], c, tls) {
					b := &c.searches[i]
					fmt.Fprintf(&text, "# %s #%d %s: %s\n", c.capture, b.n, name, goldenDescribe(c, b, r.Names, tls))
					if len(answers.msgs) == 0 {
						text.WriteString("nothing sent\n")
					}
					for _, m := range answers.msgs {
						fmt.Fprintf(&text, "%x\n", m)
					}
					text.WriteString("\n")
					entries++
					if reg == 0 {
						s := goldenanswers.Variant(b.s, tls)
						goldenanswers.Accepted(t, fmt.Sprintf("%s #%d %s", c.capture, b.n, name), &s, r.Names, answers.msgs, answers.bigEndian)
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

func goldenDescribe(c *goldenConn, b *goldenBlock, reg goldenanswers.Resolver, tls bool) string {
	order := "little"
	if b.hdr.BigEndian() {
		order = "big"
	}
	s := goldenanswers.Variant(b.s, tls)
	return fmt.Sprintf("TCP from %s, %s endian, %s", c.src, order, goldenanswers.Describe(&s, reg))
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
			if h.Command == pva.CmdSearchResponse && m.Decode(p, h.BigEndian()) == nil && m.Seq == goldenSeqEnd && m.GUID == goldenanswers.Own {
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
