package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A configuration written for an older pvans that sets a setting now a
// constant is accepted: check-config says which key is ignored and what
// is used instead, and reports the configuration OK.
func TestCheckConfigWarnsRemovedSetting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.yaml")
	if err := os.WriteFile(path, []byte("tcp:\n  read_timeout: 5s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	code := run([]string{"check-config", "--config", path, "--udp-beacon-queue", "100"}, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "configuration OK") {
		t.Fatalf("check-config refused an old file: %d\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{
		"WARNING: setting ignored: file " + path + ":2: tcp.read_timeout is no longer a setting and is ignored (value \"5s\"): pvans now uses tcpsearch.DefaultReadTimeout = 10s",
		"WARNING: setting ignored: flag --udp-beacon-queue: udp.beacon_queue is no longer a setting",
	} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("no %q in:\n%s", want, errb.String())
		}
	}
	if strings.Contains(out.String(), "tcp.read_timeout") {
		t.Errorf("check-config lists the removed setting:\n%s", out.String())
	}
	// The old flags parse but are documented nowhere.
	for _, args := range [][]string{{"man", "1"}, {"man", "5"}, {"completion", "bash"}, {"completion", "zsh"}, {"run", "-h"}} {
		out.Reset()
		errb.Reset()
		run(args, &out, &errb)
		text := out.String() + errb.String()
		if len(text) < 100 {
			t.Fatalf("%v printed %q", args, text)
		}
		for _, f := range []string{"tcp-read-timeout", `tcp\-read\-timeout`, "udp-beacon-queue", `udp\-beacon\-queue`, "read_timeout"} {
			if strings.Contains(text, f) {
				t.Errorf("%v documents the removed %s", args, f)
			}
		}
	}
}
