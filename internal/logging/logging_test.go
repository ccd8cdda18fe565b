package logging

import (
	"testing"

	"go.uber.org/zap/zapcore"
)

func TestNewLevelsAndFormats(t *testing.T) {
	for _, f := range []string{"auto", "console", "json", ""} {
		l, lvl, err := New("warn", f)
		if err != nil || l == nil {
			t.Fatalf("format %q: %v", f, err)
		}
		if lvl.Level() != zapcore.WarnLevel {
			t.Fatalf("level %v", lvl.Level())
		}
	}
	if _, _, err := New("loud", "json"); err == nil {
		t.Fatal("bad level accepted")
	}
	if _, _, err := New("info", "xml"); err == nil {
		t.Fatal("bad format accepted")
	}
}
