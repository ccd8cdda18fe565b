package main

import (
	"bytes"
	"strings"
	"testing"
)

// `pvans list` lists one thing at a time; two choices are refused rather
// than one silently winning.
func TestListRefusesTwoChoices(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"list", "--api", "http://127.0.0.1:1", "--servers", "--duplicates"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "at most one of") {
		t.Fatalf("exit %d, stderr %q; want 2 and a message naming the choices", code, errb.String())
	}
}
