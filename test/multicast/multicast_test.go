//go:build linux

// Package multicast holds the multicast search-through test: pvans
// searches for names on an IPv4 multicast group with TTL 1 through a named
// interface, as PVXS does for an addr_list entry like 239.255.18.1,1@eth1.
// It has no non-test code. Everything runs in network namespaces the test
// makes.
package multicast

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvans-project/pvans/internal/sim"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

// pvans 10.88.0.1 ── 10.88.0.2 server (member of 239.255.18.1)
var (
	pvansAddr  = netip.MustParseAddr("10.88.0.1")
	serverAddr = netip.MustParseAddr("10.88.0.2")
	group      = netip.MustParseAddr("239.255.18.1")
)

// counters count, in the server's namespace, the searches arriving for
// the group with TTL 1 and with any other TTL.
const counters = `table ip pvansmc {
	chain pre {
		type filter hook prerouting priority 0;
		ip daddr 239.255.18.1 udp dport 5076 ip ttl 1 counter
		ip daddr 239.255.18.1 udp dport 5076 ip ttl != 1 counter
	}
}
`

var seq atomic.Int32

// packets reads the two counters.
func packets(t *testing.T, n *testutil.Netns) (ttl1, other int) {
	t.Helper()
	out, err := n.Command("nft", "list", "chain", "ip", "pvansmc", "pre").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list: %v: %s", err, out)
	}
	m := regexp.MustCompile(`ip ttl (1|!= 1) counter packets (\d+)`).FindAllStringSubmatch(string(out), -1)
	if len(m) != 2 {
		t.Fatalf("nft counters not found:\n%s", out)
	}
	for _, x := range m {
		v, _ := strconv.Atoi(x[2])
		if x[1] == "1" {
			ttl1 = v
		} else {
			other = v
		}
	}
	return
}

// A name no beacon taught is searched for on the multicast group with TTL
// 1 (and only there: pvans's namespace routes 224.0.0.0/4 to lo, so only
// the @interface of the entry gets it onto the link), the server that is a
// member answers, pvans verifies over TCP and the client is answered.
func TestSearchThroughMulticast(t *testing.T) {
	testutil.RequireNetns(t, "multicast tests")
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("the multicast test counts packets with nft (apt-get install nftables); skipping")
	}
	if testing.Short() {
		t.Skip("builds and runs pvans in namespaces")
	}
	id := fmt.Sprintf("%d-%d", os.Getpid(), seq.Add(1))
	pn := testutil.NewNetns(t, "pvans-mc-p-"+id)
	sn := testutil.NewNetns(t, "pvans-mc-s-"+id)
	i := seq.Add(1)
	testutil.Veth(t, pn, fmt.Sprintf("mcp%d", i), []string{pvansAddr.String() + "/24"}, sn, fmt.Sprintf("mcs%d", i), []string{serverAddr.String() + "/24"})
	cmd := sn.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(counters)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}

	// The server: a simulated IOC answering searches on 0.0.0.0:5076 (so
	// it sees datagrams for every group its host joined), no beacons, no
	// discovery answers: pvans can only find it by searching.
	var site *sim.Site
	if err := sn.Do(func() (err error) {
		site, err = sim.Start(context.Background(), sim.Options{Host: netip.IPv4Unspecified(), TCPPort: 5075, UDPPort: 5076,
			Names: [][]string{{"mc:pv"}}, NoPing: true})
		return
	}); err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	// Join the group on the server's link (membership is the interface's).
	var member *net.UDPConn
	if err := sn.Do(func() (err error) {
		member, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero})
		if err != nil {
			return err
		}
		rc, err := member.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		err = rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptIPMreq(int(fd), unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP,
				&unix.IPMreq{Multiaddr: group.As4(), Interface: serverAddr.As4()})
		})
		if err == nil {
			err = serr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer member.Close()

	p := harness.Start(t, harness.Options{Netns: pn, Args: []string{
		"--addr-list", group.String() + ",1@" + pvansAddr.String(), "--search-through", "--discovery-at-start=false"}})
	got, err := p.Query([]string{"mc:pv"}, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := netip.AddrPortFrom(serverAddr, 5075)
	if a, ok := got["mc:pv"]; !ok || a.Endpoint != want || a.GUID != site.Server(0).GUID {
		ttl1, other := packets(t, sn)
		t.Logf("group searches: %d with TTL 1, %d other", ttl1, other)
		if m, err := p.Metrics(); err == nil {
			for k, v := range m {
				if strings.Contains(k, "repl") || strings.Contains(k, "searchring") || strings.Contains(k, "upstream") {
					t.Logf("%s %v", k, v)
				}
			}
		}
		t.Fatalf("answer %+v, want %s %s", got, want, site.Server(0).GUID)
	}
	ttl1, other := packets(t, sn)
	if ttl1 == 0 || other != 0 {
		t.Errorf("searches on the group: %d with TTL 1, %d with another TTL", ttl1, other)
	}
	if ok, _ := p.HasName("mc:pv"); !ok {
		t.Errorf("the name is not in the registry after TCP verification")
	}
}
