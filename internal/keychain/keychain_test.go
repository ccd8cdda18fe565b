package keychain

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"

	"github.com/pvans-project/pvans/internal/testutil"
)

// TestLoadRefusesBadKeychains: each bad keychain is refused with a reason
// that names what is wrong.
func TestLoadRefusesBadKeychains(t *testing.T) {
	dir := t.TempDir()
	pki := testutil.NewPKI(t, "kc CA")
	good := pki.Issue(t, "pvans", testutil.CertOptions{Both: true})
	goodPath := good.Keychain(t, dir, "good.p12", "secret")
	clientOnly := pki.Issue(t, "client", testutil.CertOptions{Client: true}).Keychain(t, dir, "client.p12", "")
	expired := pki.Issue(t, "old", testutil.CertOptions{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}).Keychain(t, dir, "old.p12", "")
	caPFX, err := pkcs12.Modern.Encode(pki.CAKey, pki.CA, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	caPath := filepath.Join(dir, "ca.p12")
	other := pki.Issue(t, "other", testutil.CertOptions{})
	mismatch, err := pkcs12.Modern.Encode(other.Key, good.Leaf, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	mismatchPath := filepath.Join(dir, "mismatch.p12")
	junkPath := filepath.Join(dir, "junk.p12")
	for p, b := range map[string][]byte{caPath: caPFX, mismatchPath: mismatch, junkPath: []byte("-----BEGIN CERTIFICATE-----\n")} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	for _, c := range []struct {
		name, spec, want string
	}{
		{"missing", filepath.Join(dir, "nope.p12"), "cannot read"},
		{"empty", "", "no file named"},
		{"wrong password", goodPath + ";wrong", "not a PKCS#12 file this password opens"},
		{"no password given", goodPath, "not a PKCS#12 file this password opens"},
		{"not PKCS#12", junkPath, "not a PKCS#12 file"},
		{"CA as end entity", caPath, "is a CA certificate"},
		{"client-only EKU for a server", clientOnly, "does not permit use as a TLS server"},
		{"expired", expired, "expired at"},
		{"key does not match", mismatchPath, "private key does not match"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(c.spec, true, now)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load(%q) = %v, want an error saying %q", c.spec, err, c.want)
			}
		})
	}
	k, err := Load(goodPath+";secret", true, now)
	if err != nil {
		t.Fatal(err)
	}
	if k.Leaf.Subject.CommonName != "pvans" || !k.NotAfter().Equal(good.Leaf.NotAfter) {
		t.Fatalf("loaded %v until %v", k.Leaf.Subject, k.NotAfter())
	}
}

// TestServerConfigHandshakes: a listener with ServerConfig speaks TLS 1.3
// with ALPN pva/1, verifies a client certificate against the keychain's
// roots, requires one with ClientCertRequire, and serves the re-read
// keychain's certificate after Reload.
func TestServerConfigHandshakes(t *testing.T) {
	dir := t.TempDir()
	pki := testutil.NewPKI(t, "kc CA")
	path := pki.Issue(t, "pvans-1", testutil.CertOptions{}).Keychain(t, dir, "srv.p12", "")
	client := pki.Issue(t, "client", testutil.CertOptions{Client: true})
	stranger := testutil.NewPKI(t, "other CA").Issue(t, "stranger", testutil.CertOptions{Client: true})
	h, err := NewHolder(path, true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	handshake := func(cc ClientCert, cert *testutil.Cert) (tls.ConnectionState, error) {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", h.ServerConfig(cc))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err == nil {
				_ = c.(*tls.Conn).Handshake()
				c.Close()
			}
		}()
		cfg := pki.ClientConfig(nil)
		if cert != nil {
			// Sent whatever CAs the server names (a Go client otherwise
			// keeps back a certificate the server's CAs did not issue).
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert.TLS, nil }
		}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cfg)
		if err != nil {
			return tls.ConnectionState{}, err
		}
		defer c.Close()
		// TLS 1.3 reports a refused client certificate on the first read.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		if err != nil && !strings.Contains(err.Error(), "EOF") {
			return c.ConnectionState(), err
		}
		return c.ConnectionState(), nil
	}
	st, err := handshake(ClientCertOptional, nil)
	if err != nil || st.Version != tls.VersionTLS13 || st.NegotiatedProtocol != ALPN || st.PeerCertificates[0].Subject.CommonName != "pvans-1" {
		t.Fatalf("optional, no client cert: %+v %v", st, err)
	}
	if _, err := handshake(ClientCertOptional, client); err != nil {
		t.Fatalf("optional, good client cert: %v", err)
	}
	if _, err := handshake(ClientCertOptional, stranger); err == nil {
		t.Fatal("a client certificate from another CA was accepted")
	}
	if _, err := handshake(ClientCertRequire, nil); err == nil {
		t.Fatal("client_cert=require accepted a client without a certificate")
	}
	if _, err := handshake(ClientCertRequire, client); err != nil {
		t.Fatalf("require, good client cert: %v", err)
	}

	pki.Issue(t, "pvans-2", testutil.CertOptions{}).Keychain(t, dir, "srv.p12", "")
	if err := h.Reload("", time.Now()); err != nil {
		t.Fatal(err)
	}
	if st, err := handshake(ClientCertOptional, nil); err != nil || st.PeerCertificates[0].Subject.CommonName != "pvans-2" {
		t.Fatalf("after reload: %v %v", st.PeerCertificates, err)
	}
	if err := os.WriteFile(path, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.Reload("", time.Now()); err == nil {
		t.Fatal("a damaged keychain was taken on reload")
	}
	if h.Current().Leaf.Subject.CommonName != "pvans-2" {
		t.Fatal("a failed reload dropped the keychain in force")
	}
}

// TestLoadsWhatOpenSSLWrites: a keychain made by `openssl pkcs12 -export`
// with OpenSSL 3's defaults (AES-256-CBC, PBKDF2, SHA-256 MAC), as a
// Secure PVAccess site makes them, loads. Skipped without openssl.
func TestLoadsWhatOpenSSLWrites(t *testing.T) {
	bin, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("no openssl")
	}
	dir := t.TempDir()
	pki := testutil.NewPKI(t, "openssl CA")
	c := pki.Issue(t, "ioc-ossl", testutil.CertOptions{})
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.Key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	out := filepath.Join(dir, "ioc.p12")
	cmd := exec.Command(bin, "pkcs12", "-export", "-out", out, "-passout", "pass:pw",
		"-inkey", write("key.pem", "PRIVATE KEY", keyDER), "-in", write("cert.pem", "CERTIFICATE", c.Leaf.Raw),
		"-certfile", write("ca.pem", "CERTIFICATE", pki.CA.Raw))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("openssl: %v\n%s", err, b)
	}
	k, err := Load(out+";pw", true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if k.Leaf.Subject.CommonName != "ioc-ossl" || !k.Roots.Equal(pki.Pool) {
		t.Fatalf("loaded %v", k.Leaf.Subject)
	}
}

// TestClientConfig: pvans as a TLS client (probes) accepts a server
// certificate chained to its roots whatever the host name, refuses one
// from another CA, and sends its own certificate only when its
// extendedKeyUsage allows client use.
func TestClientConfig(t *testing.T) {
	dir := t.TempDir()
	site := testutil.NewPKI(t, "Site CA")
	both, err := NewHolder(site.Issue(t, "pvans", testutil.CertOptions{Both: true}).Keychain(t, dir, "both.p12", ""), true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	serverOnly, err := NewHolder(site.Issue(t, "pvans-s", testutil.CertOptions{}).Keychain(t, dir, "srv.p12", ""), true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dial := func(srvCfg *tls.Config, h *Holder) error {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", srvCfg)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			if c, err := ln.Accept(); err == nil {
				_ = c.(*tls.Conn).Handshake()
				c.Close()
			}
		}()
		cfg := h.ClientConfig()
		cfg.ServerName = "not-the-certificate-name"
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != nil && !strings.Contains(err.Error(), "EOF") {
			return err
		}
		return nil
	}
	ioc := site.Issue(t, "ioc", testutil.CertOptions{})
	require := site.ServerConfig(ioc)
	require.ClientAuth = tls.RequireAndVerifyClientCert
	if err := dial(require, both); err != nil {
		t.Fatalf("site server, client certificate required: %v", err)
	}
	if err := dial(require, serverOnly); err == nil {
		t.Fatal("a serverAuth-only certificate was sent as a client certificate")
	}
	if err := dial(site.ServerConfig(ioc), serverOnly); err != nil {
		t.Fatalf("site server, no client certificate needed: %v", err)
	}
	stranger := testutil.NewPKI(t, "Other CA")
	if err := dial(stranger.ServerConfig(stranger.Issue(t, "evil", testutil.CertOptions{})), both); err == nil {
		t.Fatal("a server certificate from another CA was accepted")
	}
}

// TestAccount: the x509 account is PVXS's (ossl.cpp fill_credentials):
// the first CN of the subject, not Go's CommonName (the last), cut at a
// NUL and at 62 bytes; none when the first CN is empty or there is none.
func TestAccount(t *testing.T) {
	cn := func(v string) pkix.AttributeTypeAndValue {
		return pkix.AttributeTypeAndValue{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: v}
	}
	org := pkix.AttributeTypeAndValue{Type: asn1.ObjectIdentifier{2, 5, 4, 10}, Value: "site"}
	long := strings.Repeat("a", 64)
	for _, c := range []struct {
		names []pkix.AttributeTypeAndValue
		want  string
	}{
		{[]pkix.AttributeTypeAndValue{org, cn("guest"), cn("operator")}, "guest"},
		{[]pkix.AttributeTypeAndValue{cn("operator"), org}, "operator"},
		{[]pkix.AttributeTypeAndValue{cn("ops\x00console")}, "ops"},
		{[]pkix.AttributeTypeAndValue{cn(long)}, long[:62]},
		{[]pkix.AttributeTypeAndValue{cn(""), cn("operator")}, ""},
		{[]pkix.AttributeTypeAndValue{org}, ""},
	} {
		if got := Account(&x509.Certificate{Subject: pkix.Name{Names: c.names}}); got != c.want {
			t.Errorf("Account(%v) = %q, want %q", c.names, got, c.want)
		}
	}
	if Account(nil) != "" {
		t.Error("Account(nil) is not empty")
	}
}

// TestAccountRawBytes: X509_NAME_get_text_by_NID copies the first CN's
// content octets as they are encoded, without converting its string
// type; Go's decoded Subject converts a BMPString (UTF-16) or a
// T61String (Latin-1) to UTF-8. A certificate whose first CN is the
// BMPString "operator" is the account "" to PVXS (its first byte is a
// NUL), not "operator".
func TestAccountRawBytes(t *testing.T) {
	bmp := func(s string) asn1.RawValue {
		var b []byte
		for _, r := range s {
			b = append(b, byte(r>>8), byte(r))
		}
		return asn1.RawValue{Tag: 30, Bytes: b}
	}
	type atv struct {
		Type  asn1.ObjectIdentifier
		Value asn1.RawValue
	}
	subject := func(v asn1.RawValue) []byte {
		b, err := asn1.Marshal([]atvSET{{atv{asn1.ObjectIdentifier{2, 5, 4, 3}, v}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		v    asn1.RawValue
		want string
	}{
		{bmp("operator"), ""},
		{asn1.RawValue{Tag: 20, Bytes: []byte("caf\xe9")}, "caf\xe9"}, // T61String
		{asn1.RawValue{Tag: 12, Bytes: []byte("operator")}, "operator"},
	} {
		raw := subject(c.v)
		var rdn pkix.RDNSequence
		if _, err := asn1.Unmarshal(raw, &rdn); err != nil {
			t.Fatal(err)
		}
		var name pkix.Name
		name.FillFromRDNSequence(&rdn)
		if got := Account(&x509.Certificate{RawSubject: raw, Subject: name}); got != c.want {
			t.Errorf("Account(first CN tag %d %q) = %q, want %q", c.v.Tag, c.v.Bytes, got, c.want)
		}
	}
}

// atvSET is one RDN (an ASN.1 SET) of TestAccountRawBytes's subjects.
type atvSET []struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}
