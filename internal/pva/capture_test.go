package pva

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The capture sits beside the repository (also in CI).
const capturePath = "../../../shared/spec/captures/pvxs-1.5.2-loopback.txt"

type capBlock struct {
	N        int
	TCP      bool
	Src, Dst string
	Data     []byte
}

// capMsg is one PVA message of the capture. For TCP the stream of each
// direction is reassembled and split, so a message may come from several
// blocks (Block is where it ends) and a block may hold several messages.
type capMsg struct {
	Block   int
	TCP     bool
	Conn    string // "src>dst": one direction of one connection
	H       Header
	Raw     []byte // header + payload
	Payload []byte
}

var (
	captureOnce sync.Once
	captureBlks []capBlock
	captureErr  error
)

// parseCapture reads the "#n t=.. UDP|TCP src -> dst len=N" blocks and
// their hex dump lines ("  0000  ca 02 ...  ascii").
func parseCapture(path string) ([]capBlock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []capBlock
	want := -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			fs := strings.Fields(line)
			if len(fs) != 7 || fs[4] != "->" || !strings.HasPrefix(fs[6], "len=") {
				return nil, fmt.Errorf("bad block header %q", line)
			}
			n, err1 := strconv.Atoi(fs[0][1:])
			l, err2 := strconv.Atoi(fs[6][4:])
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("bad block header %q", line)
			}
			out = append(out, capBlock{N: n, TCP: fs[2] == "TCP", Src: fs[3], Dst: fs[5]})
			want = l
		case strings.HasPrefix(line, "  ") && len(out) > 0:
			fs := strings.Fields(line)
			b := &out[len(out)-1]
			// fields after the offset are hex bytes until the ASCII column
			for _, x := range fs[1:] {
				if len(b.Data) == want || len(x) != 2 {
					break
				}
				v, err := hex.DecodeString(x)
				if err != nil {
					break
				}
				b.Data = append(b.Data, v[0])
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if i > 0 && out[i].N != out[i-1].N+1 {
			return nil, fmt.Errorf("block numbering gap at #%d", out[i].N)
		}
	}
	return out, nil
}

func captureBlocks(tb testing.TB) []capBlock {
	tb.Helper()
	captureOnce.Do(func() { captureBlks, captureErr = parseCapture(capturePath) })
	if captureErr != nil {
		tb.Fatalf("capture: %v", captureErr)
	}
	return captureBlks
}

func block(tb testing.TB, n int) capBlock {
	tb.Helper()
	bs := captureBlocks(tb)
	if n < 1 || n > len(bs) || bs[n-1].N != n {
		tb.Fatalf("no block #%d", n)
	}
	return bs[n-1]
}

func captureMessages(tb testing.TB) []capMsg {
	tb.Helper()
	var out []capMsg
	pending := map[string][]byte{}
	for _, b := range captureBlocks(tb) {
		conn := b.Src + ">" + b.Dst
		data := b.Data
		if b.TCP {
			data = append(pending[conn], b.Data...)
		}
		for len(data) > 0 {
			h, p, rest, err := SplitMessage(data)
			if err != nil {
				if _, herr := DecodeHeader(data); b.TCP && (len(data) < HeaderSize || herr == nil) {
					break // incomplete: wait for more of the stream
				}
				tb.Fatalf("block #%d: %v", b.N, err)
			}
			raw := data[:len(data)-len(rest)]
			out = append(out, capMsg{Block: b.N, TCP: b.TCP, Conn: conn, H: h, Raw: raw, Payload: p})
			data = rest
		}
		if b.TCP {
			pending[conn] = data
		} else if len(data) != 0 {
			tb.Fatalf("block #%d: %d stray bytes in datagram", b.N, len(data))
		}
	}
	for c, p := range pending {
		if len(p) != 0 {
			tb.Fatalf("stream %s ends with %d stray bytes", c, len(p))
		}
	}
	return out
}

func blockMessages(tb testing.TB, n int) []capMsg {
	tb.Helper()
	var out []capMsg
	for _, m := range captureMessages(tb) {
		if m.Block == n {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		tb.Fatalf("block #%d has no message", n)
	}
	return out
}

// onlyMessage returns the single message of block n.
func onlyMessage(tb testing.TB, n int) capMsg {
	tb.Helper()
	ms := blockMessages(tb, n)
	if len(ms) != 1 {
		tb.Fatalf("block #%d holds %d messages, want 1", n, len(ms))
	}
	return ms[0]
}

func TestCaptureParser(t *testing.T) {
	bs := captureBlocks(t)
	if len(bs) != 102 {
		t.Fatalf("%d blocks, want 102", len(bs))
	}
	if b := bs[50]; b.N != 51 || !b.TCP || len(b.Data) != 202 || b.Src != "127.0.0.1:5075" {
		t.Fatalf("block #51 parsed as %+v", b)
	}
	if b := bs[0]; b.TCP || b.Data[0] != 0xCA || b.Data[len(b.Data)-1] != 0xFF || len(b.Data) != 47 {
		t.Fatalf("block #1 parsed as %x", b.Data)
	}
	ms := blockMessages(t, 7)
	if len(ms) != 2 || !ms[0].H.Control() || ms[1].H.Command != CmdConnectionValidation {
		t.Fatalf("block #7 split into %+v", ms)
	}
}
