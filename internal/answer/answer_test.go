package answer

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"

	"github.com/pvans-project/pvans/internal/addrmap"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/resolver"
)

var (
	guidS  = pva.GUID{0x51, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	remote = netip.MustParseAddr("10.9.9.9")
	local  = netip.MustParseAddr("127.0.0.1")
)

// oneServer is a resolver holding every name on one server: each name in
// held is claimed by ep, the rest are missing.
type oneServer struct {
	ep      resolver.Endpoint
	held    map[string]bool
	lookups int
}

func (r *oneServer) Lookup(q []pva.SearchName, b *resolver.Batch) {
	r.lookups++
	b.Groups, b.Missing = b.Groups[:0], b.Missing[:0]
	for i, n := range q {
		if !r.held[string(n.Name)] {
			b.Missing = append(b.Missing, i)
			continue
		}
		if len(b.Groups) == 0 {
			if cap(b.Groups) > 0 {
				b.Groups = b.Groups[:1]
				b.Groups[0].CIDs = b.Groups[0].CIDs[:0]
			} else {
				b.Groups = append(b.Groups, resolver.Group{})
			}
			b.Groups[0].Server = r.ep
		}
		b.Groups[0].CIDs = append(b.Groups[0].CIDs, n.CID)
	}
}

func search(flags uint8, protos []string, names ...string) *pva.Search {
	s := &pva.Search{Seq: 7, Flags: flags}
	for _, p := range protos {
		s.Protocols = append(s.Protocols, []byte(p))
	}
	for i, n := range names {
		s.Names = append(s.Names, pva.SearchName{CID: uint32(100 + i), Name: []byte(n)})
	}
	return s
}

// transports are the two requests a search makes, as udpsearch and
// tcpsearch build them (the UDP one unicast: a broadcast's misses do not
// wait).
var transports = []struct {
	name string
	tcp  bool
	// flags are the header flags the transport encodes with.
	flags uint8
}{
	{"udp", false, pva.FlagBigEndian | pva.FlagServer},
	{"tcp", true, pva.FlagServer},
}

// One table, both transports: a PVXS search (listing "tcp", and "tls" for
// a TLS client) gets the same claim, or the same refusal, over UDP and
// over TCP, and the claim encoded in each transport's byte order decodes
// to the same answer.
func TestClaimsAgreeOverBothTransports(t *testing.T) {
	mapped, err := addrmap.ParseMap([]string{"servers=172.17.0.0/16 to=10.0.0.5"})
	if err != nil {
		t.Fatal(err)
	}
	plainTLS := []string{"tls", "tcp"}
	cases := []struct {
		name   string
		ep     resolver.Endpoint
		protos []string
		to     netip.Addr
		m      addrmap.Map
		// want is the claim's endpoint and protocol; an invalid want
		// means refused, counted in refused.
		want    netip.AddrPort
		proto   string
		refused func(*Counters) uint64
		rewrote bool
	}{
		{name: "plain", ep: resolver.Endpoint{Addr: netip.MustParseAddrPort("10.1.2.3:5075"), Protocol: "tcp"},
			to: remote, want: netip.MustParseAddrPort("10.1.2.3:5075"), proto: "tcp"},
		{name: "empty protocol is tcp", ep: resolver.Endpoint{Addr: netip.MustParseAddrPort("10.1.2.3:5075")},
			to: remote, want: netip.MustParseAddrPort("10.1.2.3:5075"), proto: "tcp"},
		{name: "zero address", ep: resolver.Endpoint{Addr: netip.MustParseAddrPort("0.0.0.0:5075"), Protocol: "tcp"},
			to: remote, refused: func(c *Counters) uint64 { return c.ZeroEndpoint.Load() }},
		{name: "zero IPv6 address", ep: resolver.Endpoint{Addr: netip.MustParseAddrPort("[::]:5075"), Protocol: "tcp"},
			to: remote, refused: func(c *Counters) uint64 { return c.ZeroEndpoint.Load() }},
		{name: "zero mapped address", ep: resolver.Endpoint{Addr: netip.MustParseAddrPort("[::ffff:0.0.0.0]:5075"), Protocol: "tcp"},
			to: remote, refused: func(c *Counters) uint64 { return c.ZeroEndpoint.Load() }},
		{name: "zero port", ep: resolver.Endpoint{Addr: netip.MustParseAddrPort("10.1.2.3:0"), Protocol: "tcp"},
			to: remote, refused: func(c *Counters) uint64 { return c.ZeroEndpoint.Load() }},
		{name: "no address", ep: resolver.Endpoint{Protocol: "tcp"},
			to: remote, refused: func(c *Counters) uint64 { return c.ZeroEndpoint.Load() }},
		{name: "TLS client gets the TLS endpoint", ep: resolver.Endpoint{Addr: netip.MustParseAddrPort("10.1.2.3:5075"), TLSPort: 5076, Protocol: "tcp"},
			protos: plainTLS, to: remote, want: netip.MustParseAddrPort("10.1.2.3:5076"), proto: "tls"},
		{name: "plain client gets the plain endpoint", ep: resolver.Endpoint{Addr: netip.MustParseAddrPort("10.1.2.3:5075"), TLSPort: 5076, Protocol: "tcp"},
			to: remote, want: netip.MustParseAddrPort("10.1.2.3:5075"), proto: "tcp"},
		{name: "TLS-only server to a TLS client", ep: resolver.Endpoint{Addr: netip.MustParseAddrPort("10.1.2.3:5076"), Protocol: "tls"},
			protos: plainTLS, to: remote, want: netip.MustParseAddrPort("10.1.2.3:5076"), proto: "tls"},
		{name: "TLS-only server to a plain client", ep: resolver.Endpoint{Addr: netip.MustParseAddrPort("10.1.2.3:5076"), Protocol: "tls"},
			to: remote, refused: func(c *Counters) uint64 { return c.ProtocolSkipped.Load() }},
		{name: "unknown protocol", ep: resolver.Endpoint{Addr: netip.MustParseAddrPort("10.1.2.3:5075"), Protocol: "udp"},
			protos: []string{"tcp", "udp"}, to: remote, refused: func(c *Counters) uint64 { return c.ProtocolSkipped.Load() }},
		{name: "loopback server to a remote client", ep: resolver.Endpoint{Addr: netip.MustParseAddrPort("127.0.0.1:37445"), Protocol: "tcp"},
			to: remote, want: netip.AddrPortFrom(netip.IPv4Unspecified(), 37445), proto: "tcp", rewrote: true},
		{name: "loopback server to a local client", ep: resolver.Endpoint{Addr: netip.MustParseAddrPort("127.0.0.1:37445"), Protocol: "tcp"},
			to: local, want: netip.MustParseAddrPort("127.0.0.1:37445"), proto: "tcp"},
		{name: "address map", ep: resolver.Endpoint{Addr: netip.MustParseAddrPort("172.17.0.5:5075"), Protocol: "tcp"},
			to: remote, m: mapped, want: netip.MustParseAddrPort("10.0.0.5:5075"), proto: "tcp"},
	}
	for _, c := range cases {
		protos := c.protos
		if protos == nil {
			protos = []string{"tcp"}
		}
		c.ep.GUID = guidS
		for _, tr := range transports {
			t.Run(c.name+"/"+tr.name, func(t *testing.T) {
				cnt := NewCounters()
				ru := Rules{Counters: cnt}
				res := &oneServer{ep: c.ep, held: map[string]bool{"held:pv": true}}
				s := search(0, protos, "held:pv")
				var b resolver.Batch
				rep := ru.Answer(&Request{Search: s, Resolver: res, Client: c.to, To: c.to, Map: c.m, TCP: tr.tcp}, &b, nil)
				if res.lookups != 1 {
					t.Fatalf("%d lookups, want 1", res.lookups)
				}
				if !c.want.IsValid() {
					if len(rep.Claims) != 0 || c.refused(&cnt) != 1 {
						t.Fatalf("claims %+v, refusal counted %d times; want none, 1", rep.Claims, c.refused(&cnt))
					}
					return
				}
				if len(rep.Claims) != 1 {
					t.Fatalf("claims %+v, want 1", rep.Claims)
				}
				cl := rep.Claims[0]
				if got := netip.AddrPortFrom(cl.Addr.Addr().Unmap(), cl.Port); got != c.want || cl.Protocol != c.proto ||
					cl.GUID != guidS || cl.Group != 0 || !slices.Equal(cl.CIDs, []uint32{100}) {
					t.Fatalf("claim %+v (%v), want %v over %q", cl, got, c.want, c.proto)
				}
				if n := cnt.LoopbackRewritten.Load(); (n == 1) != c.rewrote {
					t.Fatalf("LoopbackRewritten %d", n)
				}
				hdr, p, _, err := pva.SplitMessage(Append(nil, tr.flags, s.Seq, &cl))
				if err != nil {
					t.Fatal(err)
				}
				var m pva.SearchResponse
				if err := m.Decode(p, hdr.BigEndian()); err != nil {
					t.Fatal(err)
				}
				if m.GUID != guidS || m.Seq != 7 || m.Addr != cl.Addr || m.Port != cl.Port || string(m.Protocol) != c.proto ||
					!m.Found || !slices.Equal(m.CIDs, cl.CIDs) {
					t.Fatalf("encoded %+v, claim %+v", m, cl)
				}
			})
		}
	}
}

// A push or a re-answer, decided with the offer the search's Reply gave
// (which the waiter and the remembered answer keep: Group.Offer), says
// what the direct answer to that search said, over either transport: a
// UDP search listing "tls" alone is named no plain server then either
// (it was, when the resolver kept only whether "tls" was listed and a
// push read that back as "tls" and "tcp").
func TestPushedClaimsAsDirect(t *testing.T) {
	ep := resolver.Endpoint{GUID: guidS, Addr: netip.MustParseAddrPort("10.1.2.3:5075"), TLSPort: 5076, Protocol: "tcp"}
	tlsOnly := resolver.Endpoint{GUID: guidS, Addr: netip.MustParseAddrPort("10.1.2.3:5076"), Protocol: "tls"}
	plain := resolver.Endpoint{GUID: guidS, Addr: netip.MustParseAddrPort("10.1.2.3:5075"), Protocol: "tcp"}
	for _, e := range []resolver.Endpoint{ep, tlsOnly, plain} {
		for _, protos := range [][]string{{"tcp"}, {"tls", "tcp"}, {"tls"}} {
			for _, tr := range transports {
				ru := Rules{Counters: NewCounters()}
				var b resolver.Batch
				s := search(0, protos, "held:pv")
				rep := ru.Answer(&Request{Search: s, Resolver: &oneServer{ep: e, held: map[string]bool{"held:pv": true}}, To: remote, TCP: tr.tcp}, &b, nil)
				g := resolver.Group{Server: e, CIDs: []uint32{100}, Offer: rep.Offer}
				c, ok := ru.Claim(&g, g.Offer, remote, nil)
				if ok != (len(rep.Claims) == 1) || (ok && !claimEqual(c, rep.Claims[0])) {
					t.Errorf("%v %v %s: pushed %+v (%v), answered %+v", e, protos, tr.name, c, ok, rep.Claims)
				}
			}
		}
	}
	// The case that was wrong, spelt out: nothing named either way.
	var b resolver.Batch
	ru := Rules{Counters: NewCounters()}
	rep := ru.Answer(&Request{Search: search(0, []string{"tls"}, "held:pv"), Resolver: &oneServer{ep: plain, held: map[string]bool{"held:pv": true}}, To: remote}, &b, nil)
	g := resolver.Group{Server: plain, CIDs: []uint32{100}, Offer: rep.Offer}
	if c, ok := ru.Claim(&g, g.Offer, remote, nil); ok || len(rep.Claims) != 0 || rep.Offer != TLS {
		t.Fatalf("UDP search listing only \"tls\": answered %+v (offer %v), pushed %+v (%v); want a plain server named in neither", rep.Claims, rep.Offer, c, ok)
	}
}

func claimEqual(a, b Claim) bool {
	return a.GUID == b.GUID && a.Addr == b.Addr && a.Port == b.Port && a.Protocol == b.Protocol && slices.Equal(a.CIDs, b.CIDs)
}

// A search listing neither "tcp" nor "tls" has no protocol pvans can name
// a server in: over UDP it is not looked up (counted), as a PVXS server
// drops it. Over TCP the list is not read, as a PVXS server on master
// answers on a connection.
func TestProtocolFilter(t *testing.T) {
	ep := resolver.Endpoint{GUID: guidS, Addr: netip.MustParseAddrPort("10.1.2.3:5075"), Protocol: "tcp"}
	for _, protos := range [][]string{nil, {"udp"}} {
		for _, tr := range transports {
			cnt := NewCounters()
			ru := Rules{Counters: cnt}
			res := &oneServer{ep: ep, held: map[string]bool{"held:pv": true}}
			var b resolver.Batch
			rep := ru.Answer(&Request{Search: search(pva.SearchMustReply, protos, "held:pv"), Resolver: res, To: remote, TCP: tr.tcp}, &b, nil)
			answered := len(rep.Claims) == 1 && rep.Looked == 1 && res.lookups == 1 && !rep.Negative && cnt.NoProtocol.Load() == 0
			dropped := len(rep.Claims) == 0 && rep.Looked == 0 && res.lookups == 0 && rep.Negative && cnt.NoProtocol.Load() == 1
			if (tr.tcp && !answered) || (!tr.tcp && !dropped) {
				t.Errorf("%s, protocols %v: %+v, %d lookups, NoProtocol %d", tr.name, protos, rep, res.lookups, cnt.NoProtocol.Load())
			}
		}
	}
}

// Names nobody claims wait for a search through unless the request says
// why not; over TCP nothing says so.
func TestWait(t *testing.T) {
	ep := resolver.Endpoint{GUID: guidS, Addr: netip.MustParseAddrPort("10.1.2.3:5075"), Protocol: "tcp"}
	cases := []struct {
		name  string
		r     Request
		names []string
		want  bool
	}{
		{"tcp", Request{TCP: true}, []string{"held:pv", "new:pv"}, true},
		{"udp unicast", Request{}, []string{"held:pv", "new:pv"}, true},
		{"udp broadcast", Request{Broadcast: true}, []string{"new:pv"}, false},
		{"pvans's own", Request{Own: true}, []string{"new:pv"}, false},
		{"paired", Request{Paired: true}, []string{"new:pv"}, false},
		{"nothing missing", Request{TCP: true}, []string{"held:pv"}, false},
	}
	for _, c := range cases {
		r := c.r
		r.Search, r.To = search(0, []string{"tls", "tcp"}, c.names...), remote
		r.Resolver = &oneServer{ep: ep, held: map[string]bool{"held:pv": true}}
		var b resolver.Batch
		rep := (&Rules{Counters: NewCounters()}).Answer(&r, &b, nil)
		if rep.Wait != c.want || rep.Offer != TCP|TLS {
			t.Errorf("%s: Wait %v (offer %v), want %v", c.name, rep.Wait, rep.Offer, c.want)
		}
		if c.want && !slices.Equal(b.Missing, []int{len(c.names) - 1}) {
			t.Errorf("%s: missing %v", c.name, b.Missing)
		}
	}
}

// The negative answer is owed when nothing is claimed and the search
// insists (MustReply), a discovery ping among them, with no lookup for a
// search with no names or with no resolver.
func TestNegative(t *testing.T) {
	ep := resolver.Endpoint{GUID: guidS, Addr: netip.MustParseAddrPort("10.1.2.3:5075"), Protocol: "tcp"}
	cases := []struct {
		name     string
		s        *pva.Search
		resolver bool
		want     bool
		lookups  int
	}{
		{"discovery ping", search(pva.SearchMustReply, nil), true, true, 0},
		{"discovery ping, not insisting", search(0, nil), true, false, 0},
		{"nothing held", search(pva.SearchMustReply, []string{"tcp"}, "new:pv"), true, true, 1},
		{"nothing held, not insisting", search(0, []string{"tcp"}, "new:pv"), true, false, 1},
		{"claimed", search(pva.SearchMustReply, []string{"tcp"}, "held:pv", "new:pv"), true, false, 1},
		{"no resolver", search(pva.SearchMustReply, []string{"tcp"}, "held:pv"), false, true, 0},
	}
	for _, c := range cases {
		for _, tr := range transports {
			res := &oneServer{ep: ep, held: map[string]bool{"held:pv": true}}
			r := Request{Search: c.s, To: remote, TCP: tr.tcp}
			if c.resolver {
				r.Resolver = res
			}
			var b resolver.Batch
			rep := (&Rules{Counters: NewCounters()}).Answer(&r, &b, nil)
			if rep.Negative != c.want || res.lookups != c.lookups {
				t.Errorf("%s over %s: Negative %v, %d lookups; want %v, %d", c.name, tr.name, rep.Negative, res.lookups, c.want, c.lookups)
			}
		}
	}
	// pvans's own negative answer is PVXS's: found = 0, address "any".
	n := Negative(guidS, 5075)
	want := pva.AppendSearchResponse(nil, pva.FlagServer, &pva.SearchResponse{GUID: guidS, Seq: 9, Addr: pva.AnyIPv4, Port: 5075, Protocol: []byte("tcp")})
	if got := Append(nil, pva.FlagServer, 9, &n); !bytes.Equal(got, want) {
		t.Fatalf("negative %x, want %x", got, want)
	}
}

type searched struct {
	client  netip.Addr
	tcp     bool
	payload []byte
	names   int
	missing []int
	found   int
	calls   int
}

func (o *searched) Searched(client netip.Addr, tcp bool, payload []byte, names []pva.SearchName, missing []int, found int) {
	o.calls++
	o.client, o.tcp, o.payload, o.names, o.missing, o.found = client, tcp, payload, len(names), slices.Clone(missing), found
}

// Insight hears of every search looked up, but pvans's own, with what was
// found and missing.
func TestInsightAccounting(t *testing.T) {
	ep := resolver.Endpoint{GUID: guidS, Addr: netip.MustParseAddrPort("10.1.2.3:5075"), Protocol: "tcp"}
	payload := []byte("the payload")
	for _, tr := range transports {
		ob := &searched{}
		ru := Rules{Insight: ob, Counters: NewCounters()}
		res := &oneServer{ep: ep, held: map[string]bool{"held:pv": true}}
		var b resolver.Batch
		client := netip.MustParseAddr("10.0.0.9")
		r := Request{Search: search(0, []string{"tcp"}, "held:pv", "new:pv", "held:pv"), Payload: payload, Resolver: res,
			Client: client, To: remote, TCP: tr.tcp}
		ru.Answer(&r, &b, nil)
		if ob.calls != 1 || ob.client != client || ob.tcp != tr.tcp || !bytes.Equal(ob.payload, payload) || ob.names != 3 ||
			!slices.Equal(ob.missing, []int{1}) || ob.found != 2 {
			t.Errorf("%s: insight heard %+v", tr.name, ob)
		}
		r.Own = true
		ru.Answer(&r, &b, nil)
		r.Own, r.Search = false, search(0, []string{"udp"}, "held:pv")
		ru.Answer(&r, &b, nil)
		if want := map[bool]int{false: 1, true: 2}[tr.tcp]; ob.calls != want {
			t.Errorf("%s: insight heard %d searches, want %d (not pvans's own, nor one not looked up)", tr.name, ob.calls, want)
		}
	}
}

// Append is pva.AppendSearchResponse without a SearchResponse, in either
// byte order.
func TestAppendMatchesCodec(t *testing.T) {
	c := Claim{GUID: guidS, Addr: pva.AddressFrom(netip.MustParseAddr("10.1.2.3")), Port: 5075, Protocol: "tls", CIDs: []uint32{1, 2, 0xdeadbeef}}
	for _, flags := range []uint8{pva.FlagServer, pva.FlagServer | pva.FlagBigEndian} {
		m := &pva.SearchResponse{GUID: c.GUID, Seq: 0x01020304, Addr: c.Addr, Port: c.Port, Protocol: []byte(c.Protocol), Found: true, CIDs: c.CIDs}
		if got, want := Append([]byte{0xff}, flags, m.Seq, &c), pva.AppendSearchResponse([]byte{0xff}, flags, m); !bytes.Equal(got, want) {
			t.Errorf("flags %#x: got %x want %x", flags, got, want)
		}
	}
}

// Deciding and encoding an answer allocates nothing once the scratch has
// grown (udpsearch's and tcpsearch's benchmarks measure the whole path).
func TestAnswerAllocatesNothing(t *testing.T) {
	ep := resolver.Endpoint{GUID: guidS, Addr: netip.MustParseAddrPort("10.1.2.3:5075"), TLSPort: 5076, Protocol: "tcp"}
	ru := Rules{Counters: NewCounters()}
	res := &oneServer{ep: ep, held: map[string]bool{"a": true, "b": true}}
	r := Request{Search: search(pva.SearchMustReply, []string{"tls", "tcp"}, "a", "b", "c"), Resolver: res, To: remote}
	var b resolver.Batch
	var claims []Claim
	buf := make([]byte, 0, 512)
	n := testing.AllocsPerRun(100, func() {
		rep := ru.Answer(&r, &b, claims[:0])
		claims = rep.Claims
		buf = buf[:0]
		for i := range rep.Claims {
			buf = Append(buf, pva.FlagServer, 1, &rep.Claims[i])
		}
	})
	if n != 0 || len(claims) != 1 {
		t.Fatalf("%v allocations per answer, %d claims", n, len(claims))
	}
}
