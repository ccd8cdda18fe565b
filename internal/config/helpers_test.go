package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testResolver never touches DNS.
func testResolver(host string) ([]netip.Addr, error) {
	switch host {
	case "localhost":
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	case "ioc1.example":
		return []netip.Addr{netip.MustParseAddr("2001:db8::5"), netip.MustParseAddr("127.0.0.5")}, nil
	case "v6only.example":
		return []netip.Addr{netip.MustParseAddr("::1")}, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

// parseEndpointList parses an address list given as one string, as the
// environment gives it.
func parseEndpointList(s string, defPort uint16, resolve Resolver) ([]Endpoint, error) {
	return parseEndpoints(strings.Fields(s), defPort, resolve)
}

// mustNamePattern is ParseNamePattern for patterns known to be good.
func mustNamePattern(s string) NamePattern {
	p, err := ParseNamePattern(s)
	if err != nil {
		panic(err)
	}
	return p
}

func envOf(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pvans.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustLoad(t *testing.T, o LoadOptions) *Config {
	t.Helper()
	if o.Resolve == nil {
		o.Resolve = testResolver
	}
	c, err := Load(o)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func loadErr(t *testing.T, o LoadOptions) *Error {
	t.Helper()
	if o.Resolve == nil {
		o.Resolve = testResolver
	}
	c, err := Load(o)
	if err == nil {
		t.Fatalf("Load succeeded, want error")
	}
	if c != nil {
		t.Fatalf("Load returned a Config with an error")
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T is not *Error: %v", err, err)
	}
	return e
}

func prov(c *Config, key string) Setting {
	for _, s := range c.Provenance() {
		if s.Key == key {
			return s
		}
	}
	panic("no setting " + key)
}

func hasProblem(e *Error, want string) bool {
	for _, p := range e.Problems {
		if strings.Contains(p.Error(), want) {
			return true
		}
	}
	return false
}
