//go:build linux

package trust

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

// The test network: pvans alone in namespace p; the server net (real IOC,
// a pvAccessCPP-style IOC, the attacker and a host outside the server
// allow list) in namespace s.
var (
	pvansAddr = netip.MustParseAddr("10.213.0.1")
	iocAddr   = netip.MustParseAddr("10.213.0.2")
	cppAddr   = netip.MustParseAddr("10.213.0.3")
	evilAddr  = netip.MustParseAddr("10.213.0.66")
	outAddr   = netip.MustParseAddr("10.213.0.130") // outside serverAllow
	pvansUDP  = netip.AddrPortFrom(pvansAddr, 5076)
)

const serverAllow = "10.213.0.0/25"

type topo struct {
	p, s *testutil.Netns
	pv   *harness.Pvans
}

func newTopo(t *testing.T) *topo {
	t.Helper()
	testutil.RequireNetns(t, "trust tests")
	if testing.Short() {
		t.Skip("trust tests run the daemon in namespaces; skipped with -short")
	}
	testutil.PvansBinary(t)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	r := hex.EncodeToString(b)
	tp := &topo{
		p: testutil.NewNetns(t, fmt.Sprintf("pvans-tp-%d-%s", os.Getpid(), r)),
		s: testutil.NewNetns(t, fmt.Sprintf("pvans-ts-%d-%s", os.Getpid(), r)),
	}
	testutil.Veth(t, tp.p, "t13p"+r, []string{pvansAddr.String() + "/24"}, tp.s, "t13s"+r,
		[]string{iocAddr.String() + "/24", cppAddr.String() + "/24", evilAddr.String() + "/24", outAddr.String() + "/24"})
	return tp
}

// start runs pvans in p with the server allow list and extra flags.
func (tp *topo) start(t *testing.T, extra ...string) {
	t.Helper()
	tp.startAllow(t, serverAllow, extra...)
}

// startAllow runs pvans with access.server_allow set to allow ("" for the
// default: every server allowed).
func (tp *topo) startAllow(t *testing.T, allow string, extra ...string) {
	t.Helper()
	args := []string{"--discovery-at-start=false", "--log-level", "debug"}
	if allow != "" {
		args = append(args, "--access-server-allow", allow)
	}
	args = append(args, extra...)
	tp.pv = harness.Start(t, harness.Options{Netns: tp.p, Args: args})
}

// sim starts simulated IOCs inside s (their sockets live there).
func (tp *topo) sim(t *testing.T, o sim.Options) *sim.Site {
	t.Helper()
	var site *sim.Site
	if err := tp.s.Do(func() (err error) { site, err = sim.Start(context.Background(), o); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	return site
}

// send sends one datagram from from (an address in s: the attacker may
// use any of them, a spoofed source included) to to.
func (tp *topo) send(t *testing.T, from, to netip.AddrPort, b []byte) {
	t.Helper()
	err := tp.s.Do(func() error {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(from))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.WriteToUDPAddrPort(b, to)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func beaconMsg(g pva.GUID, a pva.Address, port uint16, proto string) []byte {
	return pva.AppendBeacon(nil, pva.FlagBigEndian|pva.FlagServer, &pva.Beacon{GUID: g, Addr: a, Port: port, Protocol: proto})
}

// holder is the GUID /v1/names says answers name ("" if none).
func (tp *topo) holder(t *testing.T, name string) string {
	t.Helper()
	code, b, err := tp.pv.Get("/v1/names/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if code != 200 {
		return ""
	}
	var v struct {
		GUID string `json:"guid"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v.GUID
}

type apiServer struct {
	GUID       string `json:"guid"`
	Endpoint   string `json:"endpoint"`
	ProbeError string `json:"probe_error"`
}

func (tp *topo) servers(t *testing.T) []apiServer {
	t.Helper()
	code, b, err := tp.pv.Get("/v1/servers")
	if err != nil || code != 200 {
		t.Fatalf("GET /v1/servers: %d %v %s", code, err, b)
	}
	var v []apiServer
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// waitHolder waits until every name is answered by g.
func (tp *topo) waitHolder(t *testing.T, g pva.GUID, names ...string) {
	t.Helper()
	testutil.WaitFor(t, 15*time.Second, fmt.Sprintf("%v held by %s", names, g), func() bool {
		for _, n := range names {
			if tp.holder(t, n) != g.String() {
				return false
			}
		}
		return true
	})
}

// stillHeld checks, for a while, that every name stays with g, and that
// a client asking over TCP is answered with g and its endpoint.
func (tp *topo) stillHeld(t *testing.T, g pva.GUID, ep netip.AddrPort, names ...string) {
	t.Helper()
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		for _, n := range names {
			if h := tp.holder(t, n); h != g.String() {
				t.Fatalf("%s answered by %q, want %s (the real IOC)", n, h, g)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	ans, err := tp.pv.Query(names, 3*time.Second)
	if err != nil {
		t.Fatalf("query %v: %v (answers %v)", names, err, ans)
	}
	for _, n := range names {
		if a := ans[n]; a.GUID != g || a.Endpoint != ep {
			t.Fatalf("client answered %s with %+v, want %s at %s", n, a, g, ep)
		}
	}
}

func (tp *topo) metric(t *testing.T, series string) float64 { return tp.pv.Metric(t, series) }

// waitMetric waits until series reaches at least want.
func (tp *topo) waitMetric(t *testing.T, series string, want float64) {
	t.Helper()
	if _, ok := tp.pv.WaitMetric(series, func(v float64) bool { return v >= want }, 50*time.Millisecond, 60*time.Second); !ok {
		t.Fatalf("%s = %v, want >= %v", series, tp.metric(t, series), want)
	}
}

// ioc starts the real IOC at iocAddr beaconing to pvans and waits until
// pvans answers its names with its GUID.
func (tp *topo) ioc(t *testing.T, names ...string) (*sim.Site, pva.GUID, netip.AddrPort) {
	t.Helper()
	site := tp.sim(t, sim.Options{Host: iocAddr, Names: [][]string{names}, BeaconDests: []netip.AddrPort{pvansUDP}})
	g, ep := site.Server(0).GUID, site.Server(0).TCP
	tp.waitHolder(t, g, names...)
	return site, g, ep
}

var forgedGUID = pva.GUID{0xEE, 0xEE, 0xEE, 0xEE, 1, 2, 3, 4, 5, 6, 7, 8}

// One beacon with a new GUID and the real IOC's endpoint: sent from the
// attacker's own address it is dropped (it names an address not its
// sender's); sent from the IOC's address (spoofed) it passes the door but
// the TCP check refutes it. The names stay with the IOC throughout.
func TestForgedBeaconNewGUIDAtListedEndpoint(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	tp.start(t)
	_, g, ep := tp.ioc(t, "ioc:a", "ioc:b")

	tp.send(t, netip.AddrPortFrom(evilAddr, 0), pvansUDP, beaconMsg(forgedGUID, pva.AddressFrom(iocAddr), ep.Port(), "tcp"))
	tp.stillHeld(t, g, ep, "ioc:a", "ioc:b")
	tp.waitMetric(t, `pvans_hints_dropped_total{reason="address_mismatch"}`, 1)

	tp.send(t, netip.AddrPortFrom(iocAddr, 0), pvansUDP, beaconMsg(forgedGUID, pva.AnyIPv4, ep.Port(), "tcp"))
	tp.waitMetric(t, `pvans_probe_verifications_total{result="refuted"}`, 1)
	tp.stillHeld(t, g, ep, "ioc:a", "ioc:b")
	for _, s := range tp.servers(t) {
		if s.GUID == forgedGUID.String() {
			t.Fatalf("forged server listed: %+v", s)
		}
	}
}

// A forged beacon with protocol "zzz" (spoofed from the IOC) is dropped:
// the IOC's names keep resolving.
func TestForgedProtocolBeacon(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	tp.start(t)
	_, g, ep := tp.ioc(t, "zz:a")
	tp.send(t, netip.AddrPortFrom(iocAddr, 0), pvansUDP, beaconMsg(forgedGUID, pva.AnyIPv4, ep.Port(), "zzz"))
	tp.stillHeld(t, g, ep, "zz:a")
	tp.waitMetric(t, `pvans_hints_dropped_total{reason="protocol"}`, 1)
}

// A second server lists the same names (duplicates, first claim kept);
// then one forged beacon at the real endpoint must not hand the names to
// the second server, now or after the IOC beacons again.
func TestDuplicateThenForgedBeaconTakeover(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	tp.start(t)
	_, g, ep := tp.ioc(t, "dup:a", "dup:b")
	tp.sim(t, sim.Options{Host: evilAddr, Names: [][]string{{"dup:a", "dup:b", "evil:own"}}, BeaconDests: []netip.AddrPort{pvansUDP}})
	testutil.WaitFor(t, 10*time.Second, "the duplicate claims", func() bool {
		code, b, _ := tp.pv.Get("/v1/duplicates")
		return code == 200 && strings.Count(string(b), "dup:") >= 2
	})
	tp.send(t, netip.AddrPortFrom(iocAddr, 0), pvansUDP, beaconMsg(forgedGUID, pva.AnyIPv4, ep.Port(), "tcp"))
	tp.stillHeld(t, g, ep, "dup:a", "dup:b")
	// The real IOC beacons again (the tracker flips back): still its.
	tp.send(t, netip.AddrPortFrom(iocAddr, 0), pvansUDP, beaconMsg(g, pva.AnyIPv4, ep.Port(), "tcp"))
	tp.stillHeld(t, g, ep, "dup:a", "dup:b")
}

// access.server_allow applies to the sender, not only to the endpoint a
// datagram claims: a host outside it cannot announce an allowed endpoint.
func TestSenderOutsideServerAllow(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	tp.start(t)
	// An IOC that never beacons itself; the outsider announces it.
	site := tp.sim(t, sim.Options{Host: cppAddr, Names: [][]string{{"quiet:a"}}})
	srv := site.Server(0)
	tp.send(t, netip.AddrPortFrom(outAddr, 0), pvansUDP, beaconMsg(srv.GUID, pva.AddressFrom(cppAddr), srv.TCP.Port(), "tcp"))
	time.Sleep(1500 * time.Millisecond)
	if h := tp.holder(t, "quiet:a"); h != "" {
		t.Fatalf("quiet:a registered from a sender outside access.server_allow (holder %s)", h)
	}
	if n := len(tp.servers(t)); n != 0 {
		t.Fatalf("%d servers registered", n)
	}
	tp.waitMetric(t, `pvans_hints_dropped_total{reason="address_mismatch"}`, 1)
}

// Even a sender vouched for as a relay (access.trusted_relays) must be
// inside access.server_allow; one inside it may announce another server.
func TestTrustedRelay(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	tp.start(t, "--access-trusted-relays", outAddr.String()+"/32 "+evilAddr.String()+"/32")
	site := tp.sim(t, sim.Options{Host: cppAddr, Names: [][]string{{"relayed:a"}}})
	srv := site.Server(0)
	tp.send(t, netip.AddrPortFrom(outAddr, 0), pvansUDP, beaconMsg(srv.GUID, pva.AddressFrom(cppAddr), srv.TCP.Port(), "tcp"))
	tp.waitMetric(t, `pvans_hints_dropped_total{reason="sender_not_allowed"}`, 1)
	time.Sleep(time.Second)
	if h := tp.holder(t, "relayed:a"); h != "" {
		t.Fatalf("relayed:a registered from a relay outside access.server_allow (holder %s)", h)
	}
	tp.send(t, netip.AddrPortFrom(evilAddr, 0), pvansUDP, beaconMsg(srv.GUID, pva.AddressFrom(cppAddr), srv.TCP.Port(), "tcp"))
	tp.waitHolder(t, srv.GUID, "relayed:a")
}

// A beacon naming a third address (here a service listening only on
// pvans's own loopback) must not make pvans connect there; and a probe
// that fails shows a category, not the network's error.
func TestBeaconNamingThirdAddressIsNotProbed(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	tp.startAllow(t, "") // the default: no server allow list
	accepted := connCounter(t, tp.p, netip.MustParseAddrPort("127.0.0.1:7011"))
	tp.send(t, netip.AddrPortFrom(evilAddr, 0), pvansUDP, beaconMsg(forgedGUID, pva.AddressFrom(netip.MustParseAddr("127.0.0.1")), 7011, "tcp"))
	time.Sleep(1500 * time.Millisecond)
	if n := accepted.Load(); n != 0 {
		t.Fatalf("pvans connected %d times to a service only a forged beacon named", n)
	}
	tp.waitMetric(t, `pvans_hints_dropped_total{reason="address_mismatch"}`, 1)
	// The attacker's own address, a closed port: probed (it is the
	// sender's), and reported as a category only.
	tp.send(t, netip.AddrPortFrom(evilAddr, 0), pvansUDP, beaconMsg(forgedGUID, pva.AnyIPv4, 7012, "tcp"))
	var got []apiServer
	testutil.WaitFor(t, 10*time.Second, "the probe to fail", func() bool {
		got = tp.servers(t)
		return len(got) == 1 && got[0].ProbeError != ""
	})
	if got[0].ProbeError != "refused" {
		t.Fatalf("probe_error %q, want the category \"refused\"", got[0].ProbeError)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("loopback service reached %d times", n)
	}
}

// A static name file's names are a claim of their own: the server at that
// endpoint beaconing (its GUID is not the file's) must not wipe them.
func TestStaticNameFileSurvivesBeacon(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	dir := t.TempDir()
	// The IOC's TCP port is chosen below; a fixed one keeps the file simple.
	const port = 5999
	ep := netip.AddrPortFrom(iocAddr, port)
	if err := os.WriteFile(filepath.Join(dir, "ioc.names"), []byte("# endpoint "+ep.String()+"\nfile:a\nfile:b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tp.start(t, "--static-names-dir", dir)
	testutil.WaitFor(t, 10*time.Second, "static names", func() bool { return tp.holder(t, "file:a") != "" })
	static := tp.holder(t, "file:a")
	site := tp.sim(t, sim.Options{Host: iocAddr, TCPPort: port, Names: [][]string{{"real:a"}}, BeaconDests: []netip.AddrPort{pvansUDP}})
	tp.waitHolder(t, site.Server(0).GUID, "real:a")
	for range 10 {
		for _, n := range []string{"file:a", "file:b"} {
			if h := tp.holder(t, n); h != static {
				t.Fatalf("%s held by %q after the server beaconed, want the file's %s", n, h, static)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pvAccessCPP servers put their bound address in beacons (not "any"):
// from that same address they are believed and listed.
func TestBoundAddressBeaconIsLearned(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	tp.start(t)
	site := tp.sim(t, sim.Options{Host: cppAddr, Names: [][]string{{"cpp:a"}}})
	srv := site.Server(0)
	tp.send(t, netip.AddrPortFrom(cppAddr, 0), pvansUDP, beaconMsg(srv.GUID, pva.AddressFrom(cppAddr), srv.TCP.Port(), "tcp"))
	tp.waitHolder(t, srv.GUID, "cpp:a")
}

// searchListener is a UDP socket on the server net that sees pvans's
// search-through datagrams (an on-path attacker: it knows the client
// port, the sequence ID and the CIDs).
func (tp *topo) searchListener(t *testing.T) *net.UDPConn {
	t.Helper()
	return tp.searchListenerAt(t, netip.AddrPortFrom(netip.IPv4Unspecified(), 5076))
}

// searchListenerAt is a UDP socket at a in namespace s.
func (tp *topo) searchListenerAt(t *testing.T, a netip.AddrPort) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	if err := tp.s.Do(func() (err error) { c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(a)); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// nextSearch reads search datagrams until one asks for name; it returns
// where replies go, the sequence ID and the name's CID.
func nextSearch(t *testing.T, c *net.UDPConn, name string) (netip.AddrPort, uint32, uint32) {
	t.Helper()
	buf := make([]byte, 65536)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("no search for %s: %v", name, err)
		}
		m, ok := decodeSearch(buf[:n])
		if !ok {
			continue
		}
		for _, q := range m.Names {
			if string(q.Name) == name {
				return netip.AddrPortFrom(from.Addr(), m.ReplyPort), m.Seq, q.CID
			}
		}
	}
}

// decodeSearch decodes a datagram holding a CMD_SEARCH.
func decodeSearch(b []byte) (*pva.Search, bool) {
	h, payload, _, err := pva.SplitMessage(b)
	if err != nil || h.Command != pva.CmdSearch {
		return nil, false
	}
	var m pva.Search
	return &m, m.Decode(payload, h.BigEndian()) == nil
}

func replyMsg(g pva.GUID, seq uint32, port uint16, cids ...uint32) []byte {
	return pva.AppendSearchResponse(nil, pva.FlagBigEndian|pva.FlagServer, &pva.SearchResponse{GUID: g, Seq: seq,
		Addr: pva.AnyIPv4, Port: port, Protocol: []byte("tcp"), Found: true, CIDs: cids})
}

// Forged search-through replies: one guessing PVXS's constant sequence ID
// and CIDs counted from 1 is not matched at all; one that saw the search
// (on path, spoofing the listed IOC's address, naming its endpoint with a
// new GUID) answers the client that asked, but neither replaces the IOC
// nor registers the name: the IOC answers the TCP check with its own GUID.
func TestForgedSearchThroughReply(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	tp.start(t, "--search-through", "--addr-list", "10.213.0.255:5076")
	_, g, ep := tp.ioc(t, "ioc:a", "ioc:b")
	sniff := tp.searchListener(t)

	type result struct {
		ans map[string]nsclient.Answer
		err error
	}
	done := make(chan result, 1)
	go func() {
		a, err := tp.pv.Query([]string{"nowhere:x"}, 8*time.Second)
		done <- result{a, err}
	}()
	replyTo, seq, cid := nextSearch(t, sniff, "nowhere:x")
	guesses := make([]uint32, 64)
	for i := range guesses {
		guesses[i] = uint32(i + 1)
	}
	tp.send(t, netip.AddrPortFrom(iocAddr, 0), replyTo, replyMsg(forgedGUID, pva.SearchSeqFind, ep.Port(), guesses...))
	time.Sleep(time.Second)
	if h := tp.holder(t, "nowhere:x"); h != "" {
		t.Fatalf("a blind forged reply registered nowhere:x (holder %s)", h)
	}
	select {
	case r := <-done:
		t.Fatalf("a blind forged reply answered the client: %+v %v", r.ans, r.err)
	default:
	}
	tp.send(t, netip.AddrPortFrom(iocAddr, 0), replyTo, replyMsg(forgedGUID, seq, ep.Port(), cid))
	r := <-done
	if a, ok := r.ans["nowhere:x"]; !ok || a.GUID != forgedGUID {
		t.Fatalf("the waiting client was not answered with the reply it would have believed: %+v %v", r.ans, r.err)
	}
	tp.waitMetric(t, `pvans_probe_verifications_total{result="refuted"}`, 1)
	tp.stillHeld(t, g, ep, "ioc:a", "ioc:b")
	if h := tp.holder(t, "nowhere:x"); h != "" {
		t.Fatalf("nowhere:x registered for everyone from an unverified reply (holder %s)", h)
	}
	tp.waitMetric(t, `pvans_hints_dropped_total{reason="unmatched"}`, 1)
}

// The legitimate case: a server that never beacons answers a search-through
// search; the waiting client is answered at once, and the name is
// registered for everyone once the server confirmed it over TCP.
func TestSearchThroughAnswerThenRegistered(t *testing.T) {
	t.Parallel()
	tp := newTopo(t)
	site := tp.sim(t, sim.Options{Host: cppAddr, Names: [][]string{{"hidden:a", "hidden:b"}}})
	tp.start(t, "--search-through", "--addr-list", site.UDPAddr().String())
	srv := site.Server(0)
	start := time.Now()
	ans, err := tp.pv.Query([]string{"hidden:a"}, 10*time.Second)
	took := time.Since(start)
	if a, ok := ans["hidden:a"]; err != nil || !ok || a.GUID != srv.GUID || a.Endpoint != srv.TCP {
		t.Fatalf("answer %+v %v, want %s at %s", ans, err, srv.GUID, srv.TCP)
	}
	t.Logf("search-through answer after %s", took)
	tp.waitHolder(t, srv.GUID, "hidden:a", "hidden:b") // confirmed and listed over TCP
}
