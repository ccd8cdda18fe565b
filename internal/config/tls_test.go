package config

import (
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
