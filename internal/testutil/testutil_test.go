package testutil

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFreeTCPPortsDistinct(t *testing.T) {
	ps := FreeTCPPorts(t, 5)
	if len(ps) != 5 {
		t.Fatalf("%d ports", len(ps))
	}
	s := slices.Clone(ps)
	slices.Sort(s)
	if len(slices.Compact(s)) != 5 {
		t.Fatalf("ports not distinct: %v", ps)
	}
	for _, p := range append(ps, FreeUDPPort(t)) {
		if p == 0 || wellKnown(int(p)) {
			t.Fatalf("port %d handed out", p)
		}
	}
}

func TestWaitForReturnsOnceTrue(t *testing.T) {
	n := 0
	took := WaitFor(t, 5*time.Second, "third poll", func() bool { n++; return n == 3 })
	if n != 3 || took <= 0 {
		t.Fatalf("%d polls, took %s", n, took)
	}
}

// The capture's first server greeting is block 27: a SET_BYTE_ORDER
// control message then CONNECTION_VALIDATION (see pvaconn's handshake test).
func TestCaptureBlocks(t *testing.T) {
	b := CaptureBlocks(t)
	g := b[27]
	if len(g) < 16 || g[0] != 0xCA || g[3] != 2 || g[8] != 0xCA || g[11] != 1 {
		t.Fatalf("block 27 = %x", g)
	}
}

func TestProcOutputAndExitCode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("uses sh")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	cmd := exec.Command("sh", "-c", "echo out; echo err >&2; echo $PVANS_X; exit 3")
	cmd.Env = IsolatedEnv("PVANS_X=x1")
	p := StartProc(t, "sh", cmd)
	if code := p.WaitExit(t, 10*time.Second); code != 3 {
		t.Fatalf("exit code %d", code)
	}
	out := p.Output()
	for _, w := range []string{"out\n", "err\n", "x1\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("output %q lacks %q", out, w)
		}
	}
	if l := <-p.Lines; l != "out" {
		t.Errorf("first stdout line %q", l)
	}
	if !slices.Contains(IsolatedEnv(), "EPICS_PVA_AUTO_ADDR_LIST=NO") || len(IsolatedEnv()) < len(os.Environ()) {
		t.Error("IsolatedEnv lost the auto address list setting or the environment")
	}
}
