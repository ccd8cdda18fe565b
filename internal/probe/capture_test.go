package probe

import (
	"bytes"
	"testing"

	"github.com/pvans-project/pvans/internal/testutil"
)

// The replayed pvAccessCPP server's bytes are the repository's capture,
// byte for byte, and capGUID is server C's beacon GUID.
func TestReplayedServerIsTheCapture(t *testing.T) {
	cap := testutil.CaptureBlocks(t)
	for n, lit := range map[int][]byte{73: cap73, 75: cap75, 77: cap77, 79: cap79, 81: cap81} {
		if !bytes.Equal(lit, cap[n]) {
			t.Errorf("block #%d\n got %x\nwant %x", n, lit, cap[n])
		}
	}
	if !bytes.Equal(capGUID[:], cap[72][8:20]) {
		t.Errorf("capGUID %x, beacon #72 says %x", capGUID[:], cap[72][8:20])
	}
}
