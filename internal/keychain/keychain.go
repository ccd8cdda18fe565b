// Package keychain reads a Secure PVAccess keychain the way PVXS does
// (ossl.cpp ossl_setup_common): a PKCS#12 file named as "path[;password]"
// holding the end-entity certificate and its key, and CA certificates, of
// which the self-signed ones are the roots trusted to verify peers and the
// others are sent as the chain. It refuses what PVXS refuses (a CA
// certificate as the end entity, an extended key usage that does not allow
// the role, a key that does not match) and, since pvans refuses a bad
// keychain at start rather than at the first handshake, a certificate that
// is not valid now. A Holder keeps the keychain in force and re-reads it
// (SIGHUP) without dropping the old one when the new one is bad.
//
// It builds crypto/tls configurations; it opens no socket.
package keychain

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

// ALPN is the protocol PVXS negotiates on a TLS connection.
const ALPN = "pva/1"

// Keychain is one loaded keychain.
type Keychain struct {
	Path  string // the file (without the password)
	Cert  tls.Certificate
	Leaf  *x509.Certificate
	Roots *x509.CertPool // the self-signed CAs in the file
}

// Split separates "path;password" as PVXS does (the first ';').
func Split(spec string) (path, password string) {
	path, password, _ = strings.Cut(spec, ";")
	return path, password
}

// Load reads spec ("path[;password]") for a server (server) or client
// role and checks it; the error says what is wrong in words an operator
// can act on.
func Load(spec string, server bool, now time.Time) (*Keychain, error) {
	path, password := Split(spec)
	if path == "" {
		return nil, errors.New("keychain: no file named")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("keychain %s: cannot read: %w", path, err)
	}
	key, leaf, cas, err := pkcs12.DecodeChain(data, password)
	if err != nil {
		return nil, fmt.Errorf("keychain %s: not a PKCS#12 file this password opens: %w", path, err)
	}
	if leaf.IsCA {
		return nil, fmt.Errorf("keychain %s: the certificate %q is a CA certificate; an end-entity certificate is needed", path, leaf.Subject)
	}
	if !ekuAllows(leaf, server) {
		role := "client"
		if server {
			role = "server"
		}
		return nil, fmt.Errorf("keychain %s: extendedKeyUsage of %q does not permit use as a TLS %s", path, leaf.Subject, role)
	}
	if pub, ok := key.(interface{ Public() crypto.PublicKey }); !ok || !publicEqual(pub.Public(), leaf.PublicKey) {
		return nil, fmt.Errorf("keychain %s: the private key does not match the certificate %q", path, leaf.Subject)
	}
	if now.Before(leaf.NotBefore) {
		return nil, fmt.Errorf("keychain %s: the certificate %q is not valid before %s", path, leaf.Subject, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	if now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("keychain %s: the certificate %q expired at %s", path, leaf.Subject, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	k := &Keychain{Path: path, Leaf: leaf, Roots: x509.NewCertPool()}
	k.Cert = tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}
	for _, ca := range cas {
		if !ca.IsCA {
			continue // PVXS: "Ignore non-CA certificate in PKCS#12 chain"
		}
		if bytes.Equal(ca.RawIssuer, ca.RawSubject) && ca.CheckSignatureFrom(ca) == nil {
			k.Roots.AddCert(ca) // PVXS: a root in the file is trusted
		} else {
			k.Cert.Certificate = append(k.Cert.Certificate, ca.Raw)
		}
	}
	return k, nil
}

// ekuAllows is OpenSSL's rule as PVXS applies it: no extendedKeyUsage
// extension allows every use; otherwise it must name the role (or any).
func ekuAllows(c *x509.Certificate, server bool) bool {
	if len(c.ExtKeyUsage) == 0 && len(c.UnknownExtKeyUsage) == 0 {
		return true
	}
	want := x509.ExtKeyUsageClientAuth
	if server {
		want = x509.ExtKeyUsageServerAuth
	}
	for _, u := range c.ExtKeyUsage {
		if u == want || u == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

func publicEqual(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}

// NotAfter is when the certificate expires.
func (k *Keychain) NotAfter() time.Time { return k.Leaf.NotAfter }

// ClientCert is what PVXS's EPICS_PVAS_TLS_OPTIONS client_cert= asks of
// clients.
type ClientCert uint8

const (
	// ClientCertOptional requests a certificate and verifies one that is
	// sent (PVXS's default and "optional").
	ClientCertOptional ClientCert = iota
	// ClientCertRequire refuses a client that sends none.
	ClientCertRequire
)

// ParseOptions reads EPICS_PVAS_TLS_OPTIONS: white-space separated
// key=value; the one key PVXS knows is client_cert=require|optional.
// Unlike PVXS, which warns and goes on, an unknown key or value is an
// error: a mistyped "require" must not silently mean "optional".
func ParseOptions(s string) (ClientCert, error) {
	cc := ClientCertOptional
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		switch {
		case k == "client_cert" && v == "require":
			cc = ClientCertRequire
		case k == "client_cert" && v == "optional":
			cc = ClientCertOptional
		case k == "client_cert":
			return cc, fmt.Errorf("client_cert=%s: must be require or optional", v)
		default:
			return cc, fmt.Errorf("unknown TLS option %q (known: client_cert=require|optional)", f)
		}
	}
	return cc, nil
}

// Holder is the keychain in force, replaced whole by Reload; the TLS
// configurations it hands out read it at each handshake, so a re-read
// keychain applies to the next connection without a restart.
type Holder struct {
	server bool
	mu     sync.Mutex // serialises Reload
	spec   string
	cur    atomic.Pointer[Keychain]

	counters // metrics.go
}

// NewHolder loads spec; it fails as Load does.
func NewHolder(spec string, server bool, now time.Time) (*Holder, error) {
	k, err := Load(spec, server, now)
	if err != nil {
		return nil, err
	}
	h := &Holder{spec: spec, server: server}
	h.cur.Store(k)
	return h, nil
}

// Current is the keychain in force.
func (h *Holder) Current() *Keychain { return h.cur.Load() }

// Reload reads spec again (a new spec when not empty); on error the
// keychain in force stays.
func (h *Holder) Reload(spec string, now time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if spec == "" {
		spec = h.spec
	}
	k, err := Load(spec, h.server, now)
	if err != nil {
		h.reloadErrors.Add(1)
		return err
	}
	h.spec = spec
	h.cur.Store(k)
	return nil
}

// ServerConfig is the TLS configuration of a Secure PVAccess listener: TLS
// 1.3 at least and ALPN "pva/1" as PVXS mandates, the current keychain's
// certificate, client certificates verified against its roots (required
// with ClientCertRequire). PVXS clients check no host name, and pvans
// checks none of its clients'.
func (h *Holder) ServerConfig(cc ClientCert) *tls.Config {
	auth := tls.VerifyClientCertIfGiven
	if cc == ClientCertRequire {
		auth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: []string{ALPN},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			k := h.Current()
			return &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: []string{ALPN},
				Certificates: []tls.Certificate{k.Cert}, ClientAuth: auth, ClientCAs: k.Roots}, nil
		}}
}

// ClientConfig is the TLS configuration pvans uses as a Secure PVAccess
// client (probes): TLS 1.3 and ALPN "pva/1"; the server's certificate must
// chain to the keychain's roots, with no host name checked (as PVXS
// clients do: the name server, not the certificate, says which server is
// meant); the keychain's certificate is sent as the client certificate
// when its extendedKeyUsage allows that.
func (h *Holder) ClientConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: []string{ALPN},
		// Verified below against the keychain in force at the handshake.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyChain(cs.PeerCertificates, h.Current().Roots, x509.ExtKeyUsageServerAuth)
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			k := h.Current()
			if !ekuAllows(k.Leaf, false) {
				return &tls.Certificate{}, nil // none: the server may refuse us
			}
			return &k.Cert, nil
		}}
}

func verifyChain(chain []*x509.Certificate, roots *x509.CertPool, use x509.ExtKeyUsage) error {
	if len(chain) == 0 {
		return errors.New("keychain: the server sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{use}})
	return err
}

// Identity is how a certificate is named to operators and compared by the
// trust rule: its subject and issuer, in the form PVXS logs and pvxinfo -v
// prints ("subject:… issuer:…", ossl.cpp ShowX509), each name in RFC 4514
// form (OpenSSL prints the attributes in the opposite order).
func Identity(c *x509.Certificate) string {
	if c == nil {
		return ""
	}
	return "subject:" + c.Subject.String() + " issuer:" + c.Issuer.String()
}

// maxAccount is the longest account PVXS reads from a certificate: it
// copies the CN into a 64-byte buffer with a length of 63, which
// X509_NAME_get_text_by_NID fills with at most 62 bytes and a NUL.
const maxAccount = 62

var oidCommonName = asn1.ObjectIdentifier{2, 5, 4, 3}

// Account is the x509 account PVXS gives the peer presenting c (ossl.cpp
// fill_credentials): the first CN attribute of its subject, as
// X509_NAME_get_text_by_NID returns it — at most 62 bytes, ending at a
// NUL — and "" when c is nil or the first CN is empty or absent. It is not
// pkix.Name.CommonName, which is the last CN: a subject
// "CN=guest, CN=operator" is the account "guest" to PVXS and to pvans.
//
// The bytes are the CN's as encoded (the RawSubject's), not Go's decoded
// string: OpenSSL copies them without converting the string type, so a
// BMPString "operator" is "" to PVXS (its first byte is a NUL) and a
// T61String keeps its Latin-1 bytes.
func Account(c *x509.Certificate) string {
	if c == nil {
		return ""
	}
	if len(c.RawSubject) > 0 {
		return rawAccount(c.RawSubject)
	}
	for _, atv := range c.Subject.Names {
		if !atv.Type.Equal(oidCommonName) {
			continue
		}
		s, _ := atv.Value.(string)
		if i := strings.IndexByte(s, 0); i >= 0 {
			s = s[:i]
		}
		if len(s) > maxAccount {
			s = s[:maxAccount]
		}
		return s
	}
	return ""
}

// rawAccount is Account from a DER subject: the content octets of its
// first CN, cut as Account says; "" when it cannot be parsed (Go parsed
// the certificate from it, so a verified certificate's can).
func rawAccount(subject []byte) string {
	var rdns []asn1.RawValue
	if rest, err := asn1.Unmarshal(subject, &rdns); err != nil || len(rest) > 0 {
		return ""
	}
	for _, rdn := range rdns {
		for b := rdn.Bytes; len(b) > 0; {
			var atv struct {
				Type  asn1.ObjectIdentifier
				Value asn1.RawValue
			}
			var err error
			if b, err = asn1.Unmarshal(b, &atv); err != nil {
				return ""
			}
			if !atv.Type.Equal(oidCommonName) {
				continue
			}
			v := atv.Value.Bytes
			if i := bytes.IndexByte(v, 0); i >= 0 {
				v = v[:i]
			}
			return string(v[:min(len(v), maxAccount)])
		}
	}
	return ""
}
