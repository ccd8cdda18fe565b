package config

import (
	"net/netip"
	"strings"
	"testing"
)

// TestTLSSettings: the Secure PVAccess settings take PVXS's environment
// names (EPICS_PVAS_* first, then EPICS_PVA_*), the password never shows
// in the provenance, and a bad EPICS_PVAS_TLS_OPTIONS is refused.
func TestTLSSettings(t *testing.T) {
	c := mustLoad(t, LoadOptions{})
	if c.PVA.TLSKeychain != "" || c.PVA.TLSPort != 5076 || c.PVA.TLSOptions != "" {
		t.Fatalf("defaults %+v", c.PVA)
	}
	c = mustLoad(t, LoadOptions{Env: envOf("EPICS_PVA_TLS_KEYCHAIN", "/etc/a.p12", "EPICS_PVAS_TLS_KEYCHAIN", "/etc/pvans.p12;s3cret",
		"EPICS_PVA_TLS_PORT", "5086", "EPICS_PVAS_TLS_OPTIONS", "client_cert=require")})
	if c.PVA.TLSKeychain != "/etc/pvans.p12;s3cret" || c.PVA.TLSPort != 5086 || c.PVA.TLSOptions != "client_cert=require" {
		t.Fatalf("from env %+v", c.PVA)
	}
	if s := prov(c, "pva.tls_keychain"); strings.Contains(s.Value, "s3cret") || s.Source != "env EPICS_PVAS_TLS_KEYCHAIN" {
		t.Fatalf("provenance %+v", s)
	}
	_, err := Load(LoadOptions{Env: envOf("EPICS_PVAS_TLS_OPTIONS", "client_cert=requre"), Resolve: testResolver})
	if err == nil || !strings.Contains(err.Error(), "must be require or optional") {
		t.Fatalf("bad options: %v", err)
	}
}

// TestTCPClientAllowCertificates: access.tcp_client_allow takes x509:NAME
// entries next to prefixes; with certificates only, no address is allowed
// by itself; a certificate never overrides the deny list.
func TestTCPClientAllowCertificates(t *testing.T) {
	c := mustLoad(t, LoadOptions{Flags: map[string]string{"access-tcp-client-allow": "10.0.0.0/8 x509:ops-console", "access-tcp-client-deny": "192.0.2.66"}})
	a := &c.Access
	if len(a.TCPClientAllow) != 1 || len(a.TCPClientAllowCerts) != 1 || a.TCPClientAllowCerts[0] != "ops-console" {
		t.Fatalf("parsed %+v", a)
	}
	if s := prov(c, "access.tcp_client_allow"); s.Value != "10.0.0.0/8 x509:ops-console" {
		t.Fatalf("printed %q", s.Value)
	}
	ip := netip.MustParseAddr
	for _, tc := range []struct {
		addr, cn string
		want     bool
	}{
		{"10.1.2.3", "", true},
		{"192.0.2.1", "", false},
		{"192.0.2.1", "ops-console", true},
		{"192.0.2.1", "someone", false},
		{"192.0.2.66", "ops-console", false},
	} {
		if got := a.TCPClientCertAllowed(ip(tc.addr), tc.cn); got != tc.want {
			t.Errorf("%s with %q: %v, want %v", tc.addr, tc.cn, got, tc.want)
		}
	}
	c = mustLoad(t, LoadOptions{Flags: map[string]string{"access-tcp-client-allow": "x509:ops-console"}})
	if c.Access.TCPClientAllowed(ip("127.0.0.1")) || !c.Access.TCPClientCertAllowed(ip("127.0.0.1"), "ops-console") {
		t.Fatal("certificates only: an address was allowed by itself, or the certificate was not")
	}
	if _, err := Load(LoadOptions{Flags: map[string]string{"access-tcp-client-allow": "x509:"}, Resolve: testResolver}); err == nil {
		t.Fatal("an empty x509: entry was taken")
	}
}
