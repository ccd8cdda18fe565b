package pva

import (
	"testing"

	"github.com/pvans-project/pvans/internal/testutil"
)

// capBlock is one block of the repository's capture
// (testdata/captures/loopback.txt, read by testutil).
type capBlock = testutil.CaptureBlock

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

func captureBlocks(tb testing.TB) []capBlock {
	tb.Helper()
	return testutil.Capture(tb)
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
	return splitMessages(tb, captureBlocks(tb))
}

// splitMessages splits the blocks of a capture into PVA messages.
func splitMessages(tb testing.TB, blocks []capBlock) []capMsg {
	tb.Helper()
	var out []capMsg
	pending := map[string][]byte{}
	for _, b := range blocks {
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
	return messagesOfBlock(tb, captureMessages(tb), n)
}

func messagesOfBlock(tb testing.TB, ms []capMsg, n int) []capMsg {
	tb.Helper()
	var out []capMsg
	for _, m := range ms {
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
	if len(bs) != 104 {
		t.Fatalf("%d blocks, want 104", len(bs))
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
