package main

import (
	"flag"
	"io"
	"reflect"
	"testing"
	"time"
)

// Flags after the names are flags, as operators type them; "--" still
// ends them, so a name that starts with "-" can be given.
func TestFlagsAfterArguments(t *testing.T) {
	for _, c := range []struct {
		args    []string
		names   []string
		timeout time.Duration
	}{
		{[]string{"a", "b", "--timeout", "2s"}, []string{"a", "b"}, 2 * time.Second},
		{[]string{"--timeout=3s", "a", "b"}, []string{"a", "b"}, 3 * time.Second},
		{[]string{"a", "-timeout", "4s", "b"}, []string{"a", "b"}, 4 * time.Second},
		{[]string{"a", "--", "--timeout", "2s"}, []string{"a", "--timeout", "2s"}, 5 * time.Second},
		{[]string{"--", "-x"}, []string{"-x"}, 5 * time.Second},
		{[]string{"a", "-", "b"}, []string{"a", "-", "b"}, 5 * time.Second},
		{nil, nil, 5 * time.Second},
	} {
		fs := flag.NewFlagSet("pvans query", flag.ContinueOnError)
		timeout := fs.Duration("timeout", 5*time.Second, "")
		if err := parseFlags(fs, c.args, io.Discard); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if got := fs.Args(); !reflect.DeepEqual(got, c.names) && !(len(got) == 0 && len(c.names) == 0) {
			t.Errorf("%q: names %q, want %q", c.args, got, c.names)
		}
		if *timeout != c.timeout {
			t.Errorf("%q: timeout %v, want %v", c.args, *timeout, c.timeout)
		}
	}
	fs := flag.NewFlagSet("pvans query", flag.ContinueOnError)
	fs.Duration("timeout", 5*time.Second, "")
	if err := parseFlags(fs, []string{"a", "--nosuch"}, io.Discard); err != errUsage {
		t.Errorf("an unknown flag after a name: %v, want the usage error", err)
	}
}

// The demo's hints are in the form the reader ran it: `go run` leaves no
// `pvans` on the PATH.
func TestInvokedAs(t *testing.T) {
	for exe, want := range map[string]string{
		"/tmp/go-build1234567/b001/exe/pvans": "go run ./cmd/pvans",
		"/usr/bin/pvans":                      "pvans",
		"/home/op/go/bin/pvans":               "pvans",
		"/tmp/go-build99/b001/pvans.test":     "pvans",
	} {
		if got := invokedAs(exe); got != want {
			t.Errorf("invokedAs(%q) = %q, want %q", exe, got, want)
		}
	}
}

// A demo started in the background waits to read its terminal until it is
// in the foreground, and gives up when the demo ends.
func TestWaitForeground(t *testing.T) {
	n := 0
	if !waitForeground(func() bool { n++; return n < 3 }, time.Millisecond, nil) || n != 3 {
		t.Errorf("waited %d checks, want 3", n)
	}
	done := make(chan struct{})
	close(done)
	if waitForeground(func() bool { return true }, time.Hour, done) {
		t.Error("returned true while still in the background")
	}
}
