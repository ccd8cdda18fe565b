package testutil

import (
	"bufio"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// captureFile is the golden PVXS capture, beside the repository in
// shared/spec/captures.
const captureFile = "shared/spec/captures/pvxs-1.5.2-loopback.txt"

// CaptureBlocks reads the numbered hex blocks (#N) of the PVXS loopback
// capture; the test is skipped if the capture is not there.
func CaptureBlocks(t testing.TB) map[int][]byte {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Skipf("capture not available: %v", err)
	}
	f, err := os.Open(filepath.Join(root, "..", filepath.FromSlash(captureFile)))
	if err != nil {
		t.Skipf("capture not available: %v", err)
	}
	defer f.Close()
	out := map[int][]byte{}
	cur := -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			n, err := strconv.Atoi(strings.Fields(line)[0][1:])
			if err != nil {
				t.Fatal(err)
			}
			cur = n
			continue
		}
		fs := strings.Fields(line)
		if cur < 0 || len(fs) < 2 || len(fs[0]) != 4 {
			continue
		}
		for _, h := range fs[1:] { // the offset, then bytes, then the ASCII column
			b, err := hex.DecodeString(h)
			if len(h) != 2 || err != nil {
				break
			}
			out[cur] = append(out[cur], b...)
		}
	}
	return out
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
