package logging

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/pvans-project/pvans/internal/testutil"
)

func TestNewLevelsAndFormats(t *testing.T) {
	for _, f := range []string{"auto", "console", "json", ""} {
		l, c, err := New("warn", f)
		if err != nil || l == nil {
			t.Fatalf("format %q: %v", f, err)
		}
		if c.lvl.Level() != zapcore.WarnLevel {
			t.Fatalf("level %v", c.lvl.Level())
		}
	}
	if _, _, err := New("loud", "json"); err == nil {
		t.Fatal("bad level accepted")
	}
	if _, _, err := New("info", "xml"); err == nil {
		t.Fatal("bad format accepted")
	}
}

// A reload switches level and format of the root logger and of every
// logger derived from it (named, with fields) before the switch.
func TestApplySwitchesLevelAndFormat(t *testing.T) {
	var buf bytes.Buffer
	root, c, err := NewTo(&buf, "info", "console")
	if err != nil {
		t.Fatal(err)
	}
	child := root.Named("udp").With(zap.String("k", "v"))
	child.Debug("hidden")
	child.Info("console line")
	if err := c.Apply("debug", "json"); err != nil {
		t.Fatal(err)
	}
	child.Debug("json line")
	if err := c.Apply("warn", "nonsense"); err == nil {
		t.Fatal("bad format accepted")
	}
	child.Debug("still json at debug") // the refused Apply changed nothing
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines:\n%s", len(lines), buf.String())
	}
	if strings.HasPrefix(lines[0], "{") || !strings.Contains(lines[0], "console line") || !strings.Contains(lines[0], "udp") {
		t.Errorf("first line not console: %q", lines[0])
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "{") || !strings.Contains(l, `"k":"v"`) || !strings.Contains(l, `"logger":"udp"`) {
			t.Errorf("line after switch not JSON with the child's fields: %q", l)
		}
	}
}

// Switching while other goroutines log is safe (run with -race).
func TestApplyWhileLogging(t *testing.T) {
	var buf testutil.Buffer
	root, c, _ := NewTo(&buf, "info", "json")
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := root.With(zap.Int("g", i))
			for j := 0; j < 200; j++ {
				l.Info("x")
			}
		}()
	}
	for i := 0; i < 50; i++ {
		_ = c.Apply("info", []string{"json", "console"}[i%2])
	}
	wg.Wait()
}

// Durations are written as Go durations ("10m0s"), the form the
// configuration takes, in both formats: never a bare number of seconds.
func TestDurationsAsGoDurations(t *testing.T) {
	for _, f := range []string{"json", "console"} {
		var buf bytes.Buffer
		l, _, err := NewTo(&buf, "info", f)
		if err != nil {
			t.Fatal(err)
		}
		l.Info("snapshot loaded", zap.Duration("window", 10*time.Minute))
		if !strings.Contains(buf.String(), "10m0s") {
			t.Errorf("%s: %q, want window 10m0s", f, buf.String())
		}
	}
}
