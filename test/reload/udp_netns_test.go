//go:build linux

package reload

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

// UDP client access list on the wire, in a namespace with loopback
// multicast (a unicast search is forwarded to the loopback group and
// answered from there, as at a site): a MustReply search is answered, a
// reload denies the client, the same search gets nothing and is counted;
// a reload allowing it again restores the answer.
func TestReloadUDPClientAccessInNetns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pvans binary")
	}
	testutil.RequireNetns(t, "network namespace tests")
	ns := testutil.NewNetns(t, fmt.Sprintf("pvans-rl%d", os.Getpid()))
	file := filepath.Join(t.TempDir(), "pvans.yaml")
	if err := os.WriteFile(file, []byte("search:\n  through: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.Start(t, harness.Options{Netns: ns, Args: []string{"--config", file}})
	t.Cleanup(p.Stop)

	var c *net.UDPConn
	if err := ns.Do(func() (err error) {
		c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		return
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	port := c.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	s := pva.Search{Seq: pva.SearchSeqFind, Flags: pva.SearchUnicast | pva.SearchMustReply, ReplyPort: port,
		Protocols: [][]byte{[]byte("tcp")}, Names: []pva.SearchName{{CID: 7, Name: []byte("udp:nobody")}}}
	msg := pva.AppendSearch(nil, pva.FlagBigEndian, &s)
	answered := func() bool {
		if _, err := c.WriteToUDPAddrPort(msg, netip.AddrPortFrom(lo, p.UDP.Port())); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 2048)
		n, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return false
		}
		h, _, _, err := pva.SplitMessage(buf[:n])
		return err == nil && h.Command == pva.CmdSearchResponse
	}
	testutil.WaitFor(t, 5*time.Second, "MustReply search answered", answered)

	reloadProc(t, p.Proc, file, "search:\n  through: false\naccess:\n  udp_client_deny: [127.0.0.1/32]\n")
	for range 3 {
		if answered() {
			t.Fatal("client denied by reload answered")
		}
	}
	if v := p.Metric(t, `pvans_access_denied_total{what="udp_client"}`); v < 3 {
		t.Fatalf("access_denied_total{udp_client} = %v, want >= 3", v)
	}
	reloadProc(t, p.Proc, file, "search:\n  through: false\n")
	testutil.WaitFor(t, 5*time.Second, "answered again after the deny was removed", answered)
}
