package perf

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/testutil"
	"github.com/pvans-project/pvans/test/harness"
)

// startFloors starts the wake-up floors, pinned like pvans (PERF_SERVER_CPU):
// "floor-go" (./wakefloor: the Go runtime's netpoller and one raw recvfrom
// per datagram) and, when a C compiler is found, "floor-c"
// (testdata/wakefloor.c: epoll and recv). Neither does any work on a
// datagram, so at a low rate their CPU per datagram is the cost of being
// woken for it on this machine, below which no server's figure can go.
func startFloors(t *testing.T) []target {
	t.Helper()
	dir := t.TempDir()
	goBin := filepath.Join(dir, "wakefloor")
	if out, err := exec.Command("go", "build", "-o", goBin, "./wakefloor").CombinedOutput(); err != nil {
		t.Fatalf("build wakefloor: %v\n%s", err, out)
	}
	floors := []struct{ name, bin string }{{"floor-go", goBin}}
	if cc, err := exec.LookPath("cc"); err == nil {
		cBin := filepath.Join(dir, "wakefloor-c")
		if out, err := exec.Command(cc, "-O2", "-o", cBin, "testdata/wakefloor.c").CombinedOutput(); err != nil {
			t.Fatalf("build wakefloor.c: %v\n%s", err, out)
		}
		floors = append(floors, struct{ name, bin string }{"floor-c", cBin})
	} else {
		t.Log("no C compiler: floor-c not measured")
	}
	var targets []target
	for _, f := range floors {
		port := harness.FreePort(t)
		args := []string{f.bin, fmt.Sprint(port)} // both bind 127.0.0.1:PORT
		if cpu := os.Getenv("PERF_SERVER_CPU"); cpu != "" {
			args = append([]string{"setsid", "taskset", "-c", cpu}, args...) // own session: see startPVANSBin
		}
		p := testutil.StartProc(t, f.name, exec.Command(args[0], args[1:]...))
		tg := target{name: f.name, pid: p.Pid(), floor: true,
			udp: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port)}
		waitBound(t, tg.udp)
		targets = append(targets, tg)
	}
	return targets
}

// waitBound waits until something holds the UDP address a (our own bind to
// it fails).
func waitBound(t *testing.T, a netip.AddrPort) {
	t.Helper()
	for range 250 {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(a))
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nothing bound %s within 5 s", a)
}
