package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

// PKI is a certificate authority made by a test: a self-signed root that
// issues server and client certificates the way a Secure PVAccess site's
// does (end entities with serverAuth or clientAuth extended key usage,
// which PVXS checks). Nothing of it is kept after the test.
type PKI struct {
	CA     *x509.Certificate
	CAKey  *ecdsa.PrivateKey
	Pool   *x509.CertPool
	serial atomic.Int64
}

// Cert is one issued certificate with its key.
type Cert struct {
	Leaf *x509.Certificate
	Key  *ecdsa.PrivateKey
	TLS  tls.Certificate
	CA   *x509.Certificate
}

// NewPKI makes a root CA named cn.
func NewPKI(t testing.TB, cn string) *PKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"pvans test"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{CA: ca, CAKey: key, Pool: x509.NewCertPool()}
	p.Pool.AddCert(ca)
	p.serial.Store(1)
	return p
}

// CertOptions vary an issued certificate.
type CertOptions struct {
	Client    bool      // clientAuth (default serverAuth)
	Both      bool      // clientAuth and serverAuth
	NotBefore time.Time // default an hour ago
	NotAfter  time.Time // default a day from now
	// MoreCNs are further CN attributes after cn in the subject (one PVXS
	// reads as cn and Go's pkix.Name.CommonName as the last of them).
	MoreCNs []string
}

// Issue makes an end-entity certificate with subject CN cn, valid for
// 127.0.0.1 and ::1 too (PVXS does not check them; Go clients may).
func (p *PKI) Issue(t testing.TB, cn string, o CertOptions) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	eku := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	switch {
	case o.Both:
		eku = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	case o.Client:
		eku = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	subject := pkix.Name{CommonName: cn, Organization: []string{"pvans test"}}
	if len(o.MoreCNs) > 0 {
		// ExtraNames replace every CommonName: all the CNs go there.
		for _, n := range append([]string{cn}, o.MoreCNs...) {
			subject.ExtraNames = append(subject.ExtraNames, pkix.AttributeTypeAndValue{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: n})
		}
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial.Add(1)),
		Subject:      subject,
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  eku,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CA, &key.PublicKey, p.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Cert{Leaf: leaf, Key: key, CA: p.CA,
		TLS: tls.Certificate{Certificate: [][]byte{der, p.CA.Raw}, PrivateKey: key, Leaf: leaf}}
}

// ServerConfig is a TLS 1.3 server configuration presenting c, as PVXS
// sets one up (ALPN "pva/1"; client certificates requested, verified
// against the PKI when sent).
func (p *PKI) ServerConfig(c *Cert) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{c.TLS},
		NextProtos: []string{"pva/1"}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: p.Pool}
}

// ClientConfig is a TLS 1.3 client configuration trusting the PKI, with c
// as its certificate when c is not nil. Like PVXS it checks the chain but
// no host name.
func (p *PKI) ClientConfig(c *Cert) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: []string{"pva/1"}, RootCAs: p.Pool,
		InsecureSkipVerify: true, VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("testutil: no server certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: p.Pool, Intermediates: inter})
			return err
		}}
	if c != nil {
		cfg.Certificates = []tls.Certificate{c.TLS}
	}
	return cfg
}

// Keychain writes c, its key and the root CA as a PKCS#12 file (what
// EPICS_PVAS_TLS_KEYCHAIN names) in dir, with the password (may be
// empty), and returns its path.
func (c *Cert) Keychain(t testing.TB, dir, name, password string) string {
	t.Helper()
	pfx, err := pkcs12.Modern.Encode(c.Key, c.Leaf, []*x509.Certificate{c.CA}, password)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pfx, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// WritePEM writes c's certificate and key as dir/name.crt and
// dir/name.key (PEM), the form exporter-toolkit's web configuration and
// most TLS servers read.
func (c *Cert) WritePEM(t testing.TB, dir, name string) {
	t.Helper()
	kb, err := x509.MarshalECPrivateKey(c.Key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".crt"), "CERTIFICATE", c.Leaf.Raw)
	writePEM(t, filepath.Join(dir, name+".key"), "EC PRIVATE KEY", kb)
}

// WriteCAPEM writes the root certificate as dir/name.crt (PEM).
func (p *PKI) WriteCAPEM(t testing.TB, dir, name string) {
	t.Helper()
	writePEM(t, filepath.Join(dir, name+".crt"), "CERTIFICATE", p.CA.Raw)
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
