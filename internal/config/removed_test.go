package config

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// A file or a command line written for an older pvans that sets a setting
// now a constant still loads: the value is ignored and a warning names
// the key, where it was set, and the constant in force with its value.
func TestRemovedSettingWarns(t *testing.T) {
	path := writeFile(t, "tcp:\n  max_connections: 500\n  send_queue_bytes: 2MiB\ninsight:\n  guid_changes_per_hour: 9\n")
	c, err := Load(LoadOptions{File: path, Flags: map[string]string{"dns-timeout": "1s"}})
	if err != nil {
		t.Fatalf("a removed key refused the file: %v", err)
	}
	if c.TCP.MaxConnections != 500 {
		t.Errorf("the kept key beside it was not read: max_connections %d", c.TCP.MaxConnections)
	}
	want := []string{
		"file " + path + ":3: tcp.send_queue_bytes is no longer a setting and is ignored (value \"2MiB\"): pvans now uses tcpsearch.DefaultSendQueueBytes = 1MiB",
		"file " + path + ":5: insight.guid_changes_per_hour is no longer a setting and is ignored (value \"9\"): pvans now uses insight.DefaultGUIDChangesPerHour = 3",
		"flag --dns-timeout: dns.timeout is no longer a setting and is ignored (value \"1s\"): pvans now uses dnswatch.DefaultTimeout = 5s",
	}
	got := c.Warnings()
	if len(got) != len(want) {
		t.Fatalf("warnings %q, want %d", got, len(want))
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, w)
		}
		if !found {
			t.Errorf("no warning %q in %q", w, got)
		}
	}
	// A reload reads the same sources, so it warns again.
	next, err := Reload(c)
	if err != nil || len(next.Warnings()) != len(want) {
		t.Errorf("reload: %v, warnings %q", err, next.Warnings())
	}
	// Nothing set, nothing to say.
	if w := mustLoad(t, LoadOptions{}).Warnings(); len(w) != 0 {
		t.Errorf("defaults warn: %q", w)
	}
}

// The removed flags still parse (an old unit file or script starts), and
// pvans's own help does not list them: References has only the table.
func TestRemovedFlagsParse(t *testing.T) {
	fs := flag.NewFlagSet("pvans", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fv := RegisterFlags(fs)
	if err := fs.Parse([]string{"--tcp-read-timeout", "1s", "--probe-first-timeout=2s", "--rate-limit-tcp-message-burst", "5"}); err != nil {
		t.Fatalf("old flags refused: %v", err)
	}
	c, err := Load(fv.Options(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings()) != 3 {
		t.Errorf("warnings %q, want 3", c.Warnings())
	}
	for _, r := range References() {
		if _, gone := removed[r.Key]; gone {
			t.Errorf("%s is both a setting and removed", r.Key)
		}
	}
	for k := range removed {
		if specByKey[k] != nil {
			t.Errorf("%s is both a setting and removed", k)
		}
	}
}

// A typo is still refused: only the removed keys are forgiven.
func TestUnknownKeyStillRefused(t *testing.T) {
	path := writeFile(t, "tcp:\n  send_queue_byte: 2MiB\n")
	e := loadErr(t, LoadOptions{File: path})
	if !hasProblem(e, "tcp.send_queue_byte=\"2MiB\": unknown key") {
		t.Errorf("typo: %v", e)
	}
}
