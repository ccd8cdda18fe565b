package httpapi

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/pvans-project/pvans/internal/testutil"
)

// webPKI is a throw-away CA (testutil.PKI) with a server certificate for
// 127.0.0.1 and a client certificate, written as PEM files into dir
// (ca.crt, server.crt/.key, client.crt/.key).
type webPKI struct {
	dir        string
	pool       *x509.CertPool
	clientCert tls.Certificate
}

func newWebPKI(t *testing.T) *webPKI {
	t.Helper()
	dir := t.TempDir()
	pki := testutil.NewPKI(t, "test CA")
	pki.WriteCAPEM(t, dir, "ca")
	pki.Issue(t, "127.0.0.1", testutil.CertOptions{}).WritePEM(t, dir, "server")
	client := pki.Issue(t, "monitoring", testutil.CertOptions{Client: true})
	client.WritePEM(t, dir, "client")
	return &webPKI{dir: dir, pool: pki.Pool, clientCert: client.TLS}
}

// writeWebConfig writes web.yml into the PKI's directory (its relative
// file names resolve there) and returns its path.
func (p *webPKI) writeWebConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(p.dir, "web.yml")
	// Rename over the old file, as an editor or config manager would.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func (p *webPKI) httpClient(cert bool) *http.Client {
	tc := &tls.Config{RootCAs: p.pool}
	if cert {
		tc.Certificates = []tls.Certificate{p.clientCert}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
}

func bcryptHash(t *testing.T, pw string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func getAuth(t *testing.T, c *http.Client, url, user, pass string) (int, string, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestWebConfigClientCertificate: with client_auth_type
// RequireAndVerifyClientCert only a client holding a certificate from
// client_ca_file gets an answer; a TLS client without one fails the
// handshake, and plain HTTP to the TLS-only port is refused with 400.
func TestWebConfigClientCertificate(t *testing.T) {
	p := newWebPKI(t)
	path := p.writeWebConfig(t, `tls_server_config:
  cert_file: server.crt
  key_file: server.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: ca.crt
`)
	s, addr := startService(t, Options{Registry: &fakeReg{}, Metrics: http.NotFoundHandler(), WebConfigFile: path})

	code, body, err := getAuth(t, p.httpClient(true), "https://"+addr+"/healthz", "", "")
	if err != nil || code != 200 {
		t.Fatalf("with a client certificate: %d %q %v; want 200", code, body, err)
	}
	if !s.TLS() {
		t.Fatal("TLS() is false while serving TLS")
	}
	if _, _, err := getAuth(t, p.httpClient(false), "https://"+addr+"/healthz", "", ""); err == nil {
		t.Fatal("a client without a certificate was answered")
	}
	code, body, err = getAuth(t, &http.Client{Timeout: 10 * time.Second}, "http://"+addr+"/v1/names?match=*", "", "")
	if err != nil || code != 400 || strings.Contains(body, "[") {
		t.Fatalf("plain HTTP to the TLS listener: %d %q %v; want 400 and no listing", code, body, err)
	}
}

// TestWebConfigBasicAuth: basic_auth_users with bcrypt hashes; a wrong
// password and no credentials are answered 401, the right one 200. An
// edited file applies at the next request, without a reload.
func TestWebConfigBasicAuth(t *testing.T) {
	p := newWebPKI(t)
	conf := func(pw string) string {
		return "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  prometheus: " +
			bcryptHash(t, pw) + "\n"
	}
	path := p.writeWebConfig(t, conf("first secret"))
	_, addr := startService(t, Options{Registry: &fakeReg{}, Metrics: http.NotFoundHandler(), WebConfigFile: path})
	c := p.httpClient(false)
	url := "https://" + addr + "/v1/servers"
	for _, tc := range []struct {
		user, pass string
		want       int
	}{{"prometheus", "first secret", 200}, {"prometheus", "wrong", 401}, {"", "", 401}, {"nobody", "first secret", 401}} {
		code, body, err := getAuth(t, c, url, tc.user, tc.pass)
		if err != nil || code != tc.want {
			t.Fatalf("%q/%q: %d %q %v; want %d", tc.user, tc.pass, code, body, err, tc.want)
		}
	}

	p.writeWebConfig(t, conf("second secret"))
	if code, _, err := getAuth(t, c, url, "prometheus", "first secret"); err != nil || code != 401 {
		t.Fatalf("old password after the file changed: %d %v; want 401", code, err)
	}
	if code, _, err := getAuth(t, c, url, "prometheus", "second secret"); err != nil || code != 200 {
		t.Fatalf("new password after the file changed: %d %v; want 200", code, err)
	}

	// A file that became unreadable fails closed.
	p.writeWebConfig(t, "basic_auth_users: [not a map\n")
	if code, _, err := getAuth(t, c, url, "prometheus", "second secret"); err != nil || code != 500 {
		t.Fatalf("broken file: %d %v; want 500", code, err)
	}
}

// TestWebConfigKeepsBounds: serving through exporter-toolkit keeps the
// listener's per-source connection bound.
func TestWebConfigKeepsBounds(t *testing.T) {
	p := newWebPKI(t)
	path := p.writeWebConfig(t, "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
	s, addr := startService(t, Options{Registry: &fakeReg{}, WebConfigFile: path, Limits: Limits{MaxConnsPerSource: 1}})
	first, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.pool})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.pool})
	if err == nil {
		second.Close()
		t.Fatal("a second connection from the same source completed its handshake")
	}
	if s.cnt.perSource.Load() != 1 {
		t.Fatalf("per-source rejections %d; want 1", s.cnt.perSource.Load())
	}
}

// TestExampleWebConfig: configs/web-config.yml is a valid file once the
// certificate files it names exist.
func TestExampleWebConfig(t *testing.T) {
	b, err := os.ReadFile("../../configs/web-config.yml")
	if err != nil {
		t.Fatal(err)
	}
	p := newWebPKI(t)
	for _, f := range []string{"server.crt", "server.key", "ca.crt"} {
		if !strings.Contains(string(b), f) {
			t.Fatalf("the example names no %s", f)
		}
	}
	path := p.writeWebConfig(t, string(b))
	on, err := CheckWebConfig(path)
	if err != nil || !on {
		t.Fatalf("example: TLS %v, %v; want TLS on, no error", on, err)
	}
	// Its user's password is the one its comment says, served for real.
	_, addr := startService(t, Options{Registry: &fakeReg{}, WebConfigFile: path})
	if code, _, err := getAuth(t, p.httpClient(true), "https://"+addr+"/healthz", "prometheus", "example"); err != nil || code != 200 {
		t.Fatalf("example's user and password: %d %v; want 200", code, err)
	}
	if _, err := CheckWebConfig(filepath.Join(t.TempDir(), "web.yml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
