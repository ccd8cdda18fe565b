package testutil

import (
	"fmt"
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

// The repository's capture is there and parsed: block 27 (the name-server
// connection's greeting) is a SET_BYTE_ORDER control message then
// CONNECTION_VALIDATION (see pvaconn's handshake test).
func TestCaptureBlocks(t *testing.T) {
	bs := Capture(t)
	if len(bs) != 104 || bs[0].N != 1 || bs[0].TCP || bs[0].Dst != "127.0.0.1:5076" || len(bs[0].Data) != 47 {
		t.Fatalf("%d blocks, first %+v", len(bs), bs[0])
	}
	g := CaptureBlocks(t)[27]
	if len(g) < 16 || g[0] != 0xCA || g[3] != 2 || g[8] != 0xCA || g[11] != 1 || !bs[26].TCP {
		t.Fatalf("block 27 = %x", g)
	}
}

// row is one dump line as scripts/record-captures.sh writes it.
func row(off int, hexBytes, ascii string) string {
	return fmt.Sprintf("  %04x  %-47s  %s\n", off, hexBytes, ascii)
}

// The ASCII column is not data even when it looks like hex ("ab ca" here,
// after the 16 bytes of the first row).
func TestParseCaptureASCIIColumn(t *testing.T) {
	in := "#1 t=+0.000000 TCP 127.0.0.1:1 -> 127.0.0.1:2 len=17\n" +
		row(0, "20 20 61 62 20 63 61 20 20 20 20 20 20 20 20 20", "  ab ca         ") +
		row(0x10, "ff", ".") + "\n" +
		"#2 t=+0.100000 UDP 127.0.0.1:3 -> 127.0.0.1:4 len=2\n" +
		row(0, "ca 02", "..")
	bs, err := ParseCapture(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 2 || len(bs[0].Data) != 17 || bs[0].Data[16] != 0xFF || !bs[0].TCP || bs[1].TCP ||
		bs[1].Src != "127.0.0.1:3" || string(bs[1].Data) != "\xca\x02" {
		t.Fatalf("parsed %+v", bs)
	}
}

func TestParseCaptureRejects(t *testing.T) {
	hdr := func(n, l int) string { return fmt.Sprintf("#%d t=+0.000000 UDP a:1 -> b:2 len=%d\n", n, l) }
	for name, in := range map[string]string{
		"short block":  hdr(1, 3) + row(0, "ca 02", ".."),
		"long block":   hdr(1, 1) + row(0, "ca 02", ".."),
		"gap":          hdr(1, 1) + row(0, "ca", ".") + hdr(3, 1) + row(0, "ca", "."),
		"bad offset":   hdr(1, 2) + row(0, "ca", ".") + row(4, "02", "."),
		"bad hex":      hdr(1, 2) + row(0, "ca zz", ".."),
		"bad header":   "#1 t=+0.000000 UDP a:1 b:2 len=2\n",
		"bad protocol": "#1 t=+0.000000 SCTP a:1 -> b:2 len=0\n",
	} {
		if bs, err := ParseCapture(strings.NewReader(in)); err == nil {
			t.Errorf("%s: parsed %+v", name, bs)
		} else {
			t.Logf("%s: %v", name, err)
		}
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
