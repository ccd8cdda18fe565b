// Package goldenanswers is what the golden-answer tests of
// internal/udpsearch and internal/tcpsearch share: the captures they feed,
// the registries they answer from, and how a peer reads an answer. Each
// transport keeps only how it feeds a captured search and collects what
// pvans sends back; its golden file (testutil.Golden) is its own.
//
// It is a package of its own, not part of testutil, because it speaks the
// wire format: testutil imports nothing of pvans, so that internal/pva's
// tests can use it.
package goldenanswers

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
	"github.com/pvans-project/pvans/internal/testutil"
)

// Captures are the capture files fed, by the name the golden files give
// them.
var Captures = []struct{ Name, File string }{
	{"loopback", testutil.CaptureFile},
	{"java", testutil.JavaCaptureFile},
}

// The golden servers: one per claim rule. GUIDs spell what they are.
var (
	Plain   = resolver.Endpoint{GUID: GUID("plain"), Addr: netip.MustParseAddrPort("10.0.0.7:5075"), Protocol: "tcp"}
	TLS     = resolver.Endpoint{GUID: GUID("tls-endpoint"), Addr: netip.MustParseAddrPort("10.0.0.8:5075"), TLSPort: 5986, Protocol: "tcp"}
	Loop    = resolver.Endpoint{GUID: GUID("loopback"), Addr: netip.MustParseAddrPort("127.0.0.1:5095"), Protocol: "tcp"}
	Zero    = resolver.Endpoint{GUID: GUID("zero-addr"), Addr: netip.MustParseAddrPort("0.0.0.0:5075"), Protocol: "tcp"}
	NoPort  = resolver.Endpoint{GUID: GUID("zero-port"), Addr: netip.MustParseAddrPort("10.0.0.11:0"), Protocol: "tcp"}
	Empty   = resolver.Endpoint{GUID: GUID("no-protocol"), Addr: netip.MustParseAddrPort("10.0.0.9:5075")}
	TLSOnly = resolver.Endpoint{GUID: GUID("tls-only"), Addr: netip.MustParseAddrPort("10.0.0.10:5986"), Protocol: "tls"}
	// Own is pvans's own GUID: its found=0 answers carry it.
	Own = GUID("pvans")
)

// GUID is s as a GUID, zero-padded.
func GUID(s string) (g pva.GUID) {
	copy(g[:], s)
	return g
}

// Registries: "claims" holds the captures' names at realistic servers (a
// plain one, one with a TLS endpoint, one known by loopback) and leaves
// cap:c:mbox unheld; "edges" holds them at the registry entries the two
// answer paths used to disagree on.
var Registries = []struct {
	Name  string
	Names Resolver
}{
	{"claims", Resolver{
		"cap:a:mbox1": Plain, "demo": Plain,
		"cap:b:mbox3": TLS, "demo2": TLS,
		"cap:a:mbox2": Loop, "demo3": Loop,
	}},
	{"edges", Resolver{
		"cap:a:mbox1": Zero, "demo": Zero,
		"cap:b:mbox3": Empty, "demo2": Empty,
		"cap:a:mbox2": TLSOnly, "demo3": TLSOnly,
		"cap:c:mbox": NoPort,
	}},
}

// Resolver is a fixed registry, name to server: one group per server, in
// the order the names are searched; nothing is waited for.
type Resolver map[string]resolver.Endpoint

func (r Resolver) Lookup(q []pva.SearchName, b *resolver.Batch) {
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

// holder names the server holding name in r, or "unheld".
func (r Resolver) holder(name string) string {
	ep, ok := r[name]
	if !ok {
		return "unheld"
	}
	return string(bytes.TrimRight(ep.GUID[:], "\x00"))
}

// Variant is s as fed: as captured, or with the protocol list "tls","tcp"
// (the TLS choice).
func Variant(s pva.Search, tls bool) pva.Search {
	if tls {
		s.Protocols = [][]byte{[]byte("tls"), []byte("tcp")}
	}
	return s
}

// Encode is s as a message with hdr's flags and version (AppendSearch
// writes its own version): a captured search encoded again.
func Encode(hdr pva.Header, s *pva.Search) []byte {
	m := pva.AppendSearch(nil, hdr.Flags, s)
	m[1] = hdr.Version
	return m
}

// Describe says what s (as fed) asks and who holds each name in r: the
// text after a golden entry's transport and addresses.
func Describe(s *pva.Search, r Resolver) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seq %#x, flags %#02x, reply %v:%d, protocols %q;", s.Seq, s.Flags, s.ReplyAddr, s.ReplyPort, s.Protocols)
	if len(s.Names) == 0 {
		b.WriteString(" no names (discovery ping)")
	}
	for _, n := range s.Names {
		fmt.Fprintf(&b, " %#x %s=%s", n.CID, n.Name, r.holder(string(n.Name)))
	}
	return b.String()
}

// Accepted checks the messages pvans sent for s (as fed) as its peer
// reads them: each one server CMD_SEARCH_RESPONSE in byte order
// bigEndian (what PVXS and core-pva decode a reply by), echoing the
// search's sequence (core-pva's "kool" included) and only its CIDs, every
// name r holds answered once in a protocol s listed at a usable port
// (core-pva connects to the port named, and fails on 0), and found=0 only
// as pvans's own answer to a MustReply search. at names the case in
// errors.
func Accepted(tb testing.TB, at string, s *pva.Search, r Resolver, msgs [][]byte, bigEndian bool) {
	tb.Helper()
	want := map[uint32]bool{}
	for _, n := range s.Names {
		if _, ok := r[string(n.Name)]; ok {
			want[n.CID] = true
		}
	}
	got := map[uint32]bool{}
	negative := 0
	for _, raw := range msgs {
		h, p, rest, err := pva.SplitMessage(raw)
		if err != nil || len(rest) != 0 || h.Command != pva.CmdSearchResponse || h.Control() || h.Segment() != 0 {
			tb.Errorf("%s: not one CMD_SEARCH_RESPONSE: %x (%v)", at, raw, err)
			continue
		}
		if h.BigEndian() != bigEndian || !h.FromServer() {
			tb.Errorf("%s: header flags %#02x, want a server's, big endian %v", at, h.Flags, bigEndian)
		}
		var m pva.SearchResponse
		if err := m.Decode(p, bigEndian); err != nil {
			tb.Errorf("%s: %v", at, err)
			continue
		}
		if m.Seq != s.Seq {
			tb.Errorf("%s: sequence %#x, the search's is %#x", at, m.Seq, s.Seq)
		}
		if !m.Found {
			negative++
			if len(m.CIDs) != 0 || m.GUID != Own || !s.MustReply() {
				tb.Errorf("%s: a found=0 reply %+v", at, m)
			}
			continue
		}
		if m.Port == 0 || !s.HasProtocol(string(m.Protocol)) || len(m.CIDs) == 0 {
			tb.Errorf("%s: a reply a client cannot use: port %d, protocol %q, CIDs %v", at, m.Port, m.Protocol, m.CIDs)
		}
		for _, c := range m.CIDs {
			if !want[c] || got[c] {
				tb.Errorf("%s: CID %#x answered but not held, not searched or twice", at, c)
			}
			got[c] = true
		}
	}
	if len(got) != len(want) {
		tb.Errorf("%s: CIDs %v answered, want %v", at, got, want)
	}
	if wantNeg := len(want) == 0 && s.MustReply(); (negative == 1) != wantNeg || negative > 1 {
		tb.Errorf("%s: %d found=0 replies (MustReply %v, held %d)", at, negative, s.MustReply(), len(want))
	}
}
