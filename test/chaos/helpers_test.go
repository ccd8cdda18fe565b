//go:build linux

package chaos

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/nsclient"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

// Addresses of the test topology; they exist only inside the namespaces.
var (
	clientAddr      = netip.MustParseAddr("10.203.1.1") // client net side
	pvansClientAddr = netip.MustParseAddr("10.203.1.2") // pvans, client net
	pvansServerAddr = netip.MustParseAddr("10.203.2.2") // pvans, server net
	iocA            = netip.MustParseAddr("10.203.2.1") // first simulated IOC host
	iocB            = netip.MustParseAddr("10.203.2.3") // second simulated IOC host
	stormAddr       = netip.MustParseAddr("10.203.2.4") // beacon storm source
)

const (
	pvansTCPPort  = 5075
	pvansUDPPort  = 5076
	pvansHTTPPort = 9076
)

var pvansTCP = netip.AddrPortFrom(pvansClientAddr, pvansTCPPort)

func requireNetns(t *testing.T) {
	t.Helper()
	testutil.RequireNetns(t, "chaos tests")
	if testing.Short() {
		t.Skip("chaos tests build and run the daemon in namespaces; skipped with -short")
	}
}

func requireNft(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("this chaos test injects faults with nftables; nft not found (apt-get install nftables); skipping")
	}
}

// staleNetns matches namespaces of this package: kind, creator pid, random.
var staleNetns = regexp.MustCompile(`^pvans-[cps]-(\d+)-[0-9a-f]+$`)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// netns is one namespace made by the test.
type netns struct{ *testutil.Netns }

func newNetns(t *testing.T, kind byte, suffix string) *netns {
	t.Helper()
	return &netns{testutil.NewNetns(t, fmt.Sprintf("pvans-%c-%d-%s", kind, os.Getpid(), suffix))}
}

// nft loads an nftables script inside the namespace.
func (n *netns) nft(t *testing.T, script string) {
	t.Helper()
	cmd := n.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v: %s\nscript:\n%s", n.Name, err, out, script)
	}
}

// prefixes24 are the addresses as /24 prefixes, for testutil.Veth.
func prefixes24(as []netip.Addr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String() + "/24"
	}
	return out
}

// topo is the three-namespace test network:
//
//	client net  c: 10.203.1.1 ──veth── 10.203.1.2  p (pvans)  10.203.2.2 ──veth── s: 10.203.2.1, .3, .4  server net
type topo struct {
	c, p, s *netns
	pToS    string // pvans' interface on the server net
	sToP    string // the server net's side of it
	dir     string
	pv      *harness.Pvans // the pvans running now
}

func newTopo(t *testing.T) *topo {
	t.Helper()
	requireNetns(t)
	testutil.PvansBinary(t)
	r := randHex(3)
	tp := &topo{c: newNetns(t, 'c', r), p: newNetns(t, 'p', r), s: newNetns(t, 's', r), dir: t.TempDir()}
	veth := func(a *netns, an string, aAddrs []netip.Addr, b *netns, bn string, bAddrs []netip.Addr) {
		testutil.Veth(t, a.Netns, an, prefixes24(aAddrs), b.Netns, bn, prefixes24(bAddrs))
	}
	tp.pToS, tp.sToP = "pvps"+r, "pvsp"+r
	veth(tp.c, "pvcp"+r, []netip.Addr{clientAddr}, tp.p, "pvpc"+r, []netip.Addr{pvansClientAddr})
	veth(tp.p, tp.pToS, []netip.Addr{pvansServerAddr}, tp.s, tp.sToP, []netip.Addr{iocA, iocB, stormAddr})
	return tp
}

// startIn runs bin in namespace n with isolated EPICS settings plus env.
func startIn(t *testing.T, n *netns, name string, env []string, bin string, args ...string) *testutil.Proc {
	t.Helper()
	cmd := n.Command(bin, args...)
	cmd.Env = testutil.IsolatedEnv(env...)
	return testutil.StartProc(t, name, cmd)
}

// rssKB is the process's resident set size (VmRSS) in KiB.
func rssKB(t *testing.T, p *harness.Pvans) int {
	t.Helper()
	b := harness.RSS(p.Pid())
	if b == 0 {
		t.Fatal("no VmRSS in /proc status")
	}
	return int(b / 1024)
}

// startPvans runs the daemon in the pvans namespace (bound to every
// address there, API on its loopback) and waits for /readyz.
func (tp *topo) startPvans(t *testing.T, extra ...string) *harness.Pvans {
	t.Helper()
	tp.pv = harness.Start(t, tp.pvansOptions(extra))
	return tp.pv
}

// restartPvans is startPvans without waiting for readiness, for a test
// that times what the new process does from its start.
func (tp *topo) restartPvans(t *testing.T, extra ...string) *harness.Pvans {
	t.Helper()
	o := tp.pvansOptions(extra)
	o.NoWait = true
	tp.pv = harness.Start(t, o)
	return tp.pv
}

func (tp *topo) pvansOptions(extra []string) harness.Options {
	return harness.Options{Netns: tp.p.Netns, TCPPort: pvansTCPPort, UDPPort: pvansUDPPort, HTTPPort: pvansHTTPPort, Args: extra}
}

// get does an HTTP GET on the pvans API (inside the pvans namespace).
func (tp *topo) get(path string) (int, []byte) {
	code, b, err := tp.pv.Get(path)
	if err != nil {
		return 0, []byte(err.Error())
	}
	return code, b
}

// holder is the GUID the API says answers for name ("" if none).
func (tp *topo) holder(name string) string {
	code, b := tp.get("/v1/names/" + name)
	if code != 200 {
		return ""
	}
	var v struct{ GUID string }
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	return v.GUID
}

type apiServer struct {
	GUID     string `json:"guid"`
	Endpoint string `json:"endpoint"`
	Names    int    `json:"names"`
	Verified bool   `json:"verified"`
}

func (tp *topo) servers(t *testing.T) []apiServer {
	t.Helper()
	code, b := tp.get("/v1/servers?limit=10000") // the API's cap: a page beyond the storm's registry bound
	if code != 200 {
		t.Fatalf("GET /v1/servers: %d %s", code, b)
	}
	var v []apiServer
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// metric returns one sample of /metrics, e.g.
// `pvans_beacon_events_total{kind="dropped"}`; -1 if absent.
func (tp *topo) metric(t *testing.T, series string) float64 {
	t.Helper()
	return tp.pv.Metric(t, series)
}

// query asks pvans over TCP from the client net, on a new connection (an
// nsclient keeps the first answer per name), and waits up to wait.
func (tp *topo) query(names []string, wait time.Duration) (map[string]nsclient.Answer, error) {
	return harness.Query(tp.c.Netns, pvansTCP, names, wait)
}
