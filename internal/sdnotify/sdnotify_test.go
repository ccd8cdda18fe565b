package sdnotify

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNotifySendsToSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	n := FromEnv()
	if !n.Enabled() {
		t.Fatal("not enabled")
	}
	for _, f := range []func() error{func() error { return n.Ready("serving") }, n.Stopping, n.Watchdog} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"READY=1", "STOPPING=1", "WATCHDOG=1"}
	buf := make([]byte, 512)
	for _, w := range want {
		_ = l.SetReadDeadline(time.Now().Add(2 * time.Second))
		k, err := l.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(buf[:k]); !strings.HasPrefix(got, w) {
			t.Fatalf("got %q want prefix %q", got, w)
		}
	}
}

func TestNoSocketIsNoop(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if err := FromEnv().Ready("x"); err != nil {
		t.Fatal(err)
	}
}

func TestWatchdogInterval(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "20000000")
	t.Setenv("WATCHDOG_PID", "")
	if got := WatchdogInterval(); got != 10*time.Second {
		t.Fatalf("got %v", got)
	}
	t.Setenv("WATCHDOG_PID", strconv.Itoa(1))
	if got := WatchdogInterval(); got != 0 {
		t.Fatalf("other pid: got %v", got)
	}
}
