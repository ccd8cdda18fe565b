package testutil

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// CaptureFile is the golden capture of real PVXS and pvAccessCPP traffic,
// relative to the module root; scripts/record-captures.sh records it and
// its README lists the blocks.
const CaptureFile = "internal/pva/testdata/captures/loopback.txt"

// JavaCaptureFile is the golden capture of Phoebus core-pva (the Java
// client and server), relative to the module root;
// scripts/record-java-captures.sh records it and the same README lists the
// blocks.
const JavaCaptureFile = "internal/pva/testdata/captures/java.txt"

// CaptureBlock is one numbered block of the capture: one UDP datagram or
// the payload of one TCP segment.
type CaptureBlock struct {
	N        int
	TCP      bool
	Src, Dst string
	Data     []byte
}

type parsedCapture struct {
	once   sync.Once
	blocks []CaptureBlock
	err    error
}

var captures sync.Map // file -> *parsedCapture

// Capture returns the blocks of the golden capture in order (block n is
// element n-1). The capture is part of the repository, so a missing or
// malformed file fails the test.
func Capture(tb testing.TB) []CaptureBlock {
	tb.Helper()
	return CaptureOf(tb, CaptureFile)
}

// CaptureOf is Capture for another capture file of the repository (file
// relative to the module root, e.g. JavaCaptureFile). Each file is parsed
// once per test binary.
func CaptureOf(tb testing.TB, file string) []CaptureBlock {
	tb.Helper()
	v, _ := captures.LoadOrStore(file, &parsedCapture{})
	c := v.(*parsedCapture)
	c.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			c.err = err
			return
		}
		f, err := os.Open(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			c.err = err
			return
		}
		defer f.Close()
		c.blocks, c.err = ParseCapture(f)
	})
	if c.err != nil {
		tb.Fatalf("capture %s: %v", file, c.err)
	}
	return c.blocks
}

// CaptureBlocks is Capture by block number.
func CaptureBlocks(tb testing.TB) map[int][]byte {
	tb.Helper()
	out := map[int][]byte{}
	for _, b := range Capture(tb) {
		out[b.N] = b.Data
	}
	return out
}

// ParseCapture reads the "#n t=.. UDP|TCP src -> dst len=N" block headers
// and their hex dump lines ("  0000  ca 02 ...  ascii"). Blocks must be
// numbered 1, 2, 3... and hold exactly their stated length.
func ParseCapture(r io.Reader) ([]CaptureBlock, error) {
	var out []CaptureBlock
	want := -1
	check := func() error {
		if n := len(out); n > 0 && len(out[n-1].Data) != want {
			return fmt.Errorf("block #%d holds %d bytes, header says %d", out[n-1].N, len(out[n-1].Data), want)
		}
		return nil
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			if err := check(); err != nil {
				return nil, err
			}
			fs := strings.Fields(line)
			if len(fs) != 7 || fs[4] != "->" || !strings.HasPrefix(fs[6], "len=") || (fs[2] != "TCP" && fs[2] != "UDP") {
				return nil, fmt.Errorf("bad block header %q", line)
			}
			n, err1 := strconv.Atoi(fs[0][1:])
			l, err2 := strconv.Atoi(fs[6][4:])
			if err1 != nil || err2 != nil || l < 0 {
				return nil, fmt.Errorf("bad block header %q", line)
			}
			if n != len(out)+1 {
				return nil, fmt.Errorf("block #%d follows #%d", n, len(out))
			}
			out = append(out, CaptureBlock{N: n, TCP: fs[2] == "TCP", Src: fs[3], Dst: fs[5]})
			want = l
		case strings.HasPrefix(line, "  ") && len(out) > 0:
			// "  OOOO  " then 16 hex bytes in 47 columns, then the ASCII
			// column (which may hold spaces, so it is cut off by position)
			if len(line) < 8 {
				return nil, fmt.Errorf("block #%d: bad dump line %q", len(out), line)
			}
			b := &out[len(out)-1]
			if off, err := strconv.ParseUint(strings.TrimSpace(line[:8]), 16, 32); err != nil || int(off) != len(b.Data) {
				return nil, fmt.Errorf("block #%d: dump line %q is not at offset %#x", b.N, line, len(b.Data))
			}
			for _, x := range strings.Fields(line[8:min(len(line), 8+47)]) {
				v, err := hex.DecodeString(x)
				if err != nil || len(v) != 1 {
					return nil, fmt.Errorf("block #%d: bad dump line %q", b.N, line)
				}
				b.Data = append(b.Data, v[0])
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := check(); err != nil {
		return nil, err
	}
	return out, nil
}

// moduleRoot is the nearest directory at or above the working directory
// (a test's package directory) holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
}
