package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/testutil"
)

// pvans-sim's scripted (-do) and typed (stdin) controls.
func TestScriptedAndTypedCommands(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	in, typed := io.Pipe()
	var out, errb testutil.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-servers", "2", "-names", "3", "-do", "0s restart 1", "-do", "50ms kill 0"}, in, &out, &errb)
	}()
	testutil.WaitFor(t, 10*time.Second, "scripted commands ran", func() bool {
		return strings.Contains(out.String(), "server 1 restarted: GUID ") && strings.Contains(out.String(), "server 0 killed")
	})
	fmt.Fprintln(typed, "servers")
	fmt.Fprintln(typed, "add 1 typed:pv")
	fmt.Fprintln(typed, "frobnicate")
	testutil.WaitFor(t, 10*time.Second, "typed commands ran", func() bool {
		return strings.Contains(out.String(), "server 1 now has 4 names") && strings.Contains(errb.String(), "unknown command")
	})
	if !regexp.MustCompile(`server 0  silent .*\nserver 1  running `).MatchString(out.String()) {
		t.Fatalf("servers listing:\n%s", out.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop")
	}
	if err := run(context.Background(), []string{"-do", "restart 1"}, in, &out, &errb); err == nil {
		t.Fatal("a -do without a time accepted")
	}
}
