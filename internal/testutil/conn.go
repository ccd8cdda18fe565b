package testutil

import (
	"io"
	"net"
	"testing"
	"time"
)

// ReadN reads exactly n bytes from c, failing the test if they do not
// arrive within 5 s.
func ReadN(t testing.TB, c net.Conn, n int) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return b
}
