package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `pvans healthz` reaches a TLS listener that wants a client certificate
// and basic auth: --ca-file (or --insecure) for the daemon's certificate,
// --cert-file/--key-file for the client's, user:password@ in the URL.
func TestHealthzTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "health" || p != "pw" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Write([]byte("ok\n"))
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	// httptest's self-signed certificate serves as CA, server and client
	// certificate alike.
	dir := t.TempDir()
	cert := srv.TLS.Certificates[0]
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	crt, kf := filepath.Join(dir, "c.crt"), filepath.Join(dir, "c.key")
	os.WriteFile(crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600)
	os.WriteFile(kf, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600)
	authed := strings.Replace(srv.URL, "https://", "https://health:pw@", 1) + "/healthz"
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--ca-file", crt, "--cert-file", crt, "--key-file", kf, authed}, 0},
		{[]string{"--insecure", "--cert-file", crt, "--key-file", kf, authed}, 0},
		{[]string{"--cert-file", crt, "--key-file", kf, authed}, 1},                                 // unknown CA
		{[]string{"--ca-file", crt, authed}, 1},                                                     // no client certificate
		{[]string{"--ca-file", crt, "--cert-file", crt, "--key-file", kf, srv.URL + "/healthz"}, 1}, // 401
		{[]string{"--cert-file", crt, authed}, 2},
	} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"healthz"}, tc.args...), &out, &errb); code != tc.want {
			t.Errorf("healthz %q: exit %d (%s); want %d", tc.args, code, strings.TrimSpace(errb.String()), tc.want)
		}
	}
}

// --web.config.file (the exporters' flag) sets http.web_config_file;
// check-config refuses a broken file and marks the setting as needing a
// restart.
func TestWebConfigFileFlag(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yml"), filepath.Join(dir, "bad.yml")
	os.WriteFile(good, []byte("basic_auth_users:\n  prometheus: $2a$10$4c.r.ye8DlKjEvI1nyXAv.dMN2wDEDq6O.IlJWhIah5XVz0oTfISq\n"), 0o600)
	os.WriteFile(bad, []byte("basic_auth_users:\n  prometheus: not-a-bcrypt-hash\n"), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"check-config", "--web.config.file", good}, &out, &errb); code != 0 {
		t.Fatalf("good file: exit %d: %s", code, errb.String())
	}
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "http.web_config_file") {
			line = l
		}
	}
	if !strings.Contains(line, good) || !strings.Contains(line, "--web.config.file") || !strings.Contains(line, "needs restart") {
		t.Fatalf("check-config line %q: want the file, the flag as its source and needs restart", line)
	}
	for _, f := range []string{bad, filepath.Join(dir, "missing.yml")} {
		out.Reset()
		errb.Reset()
		if code := run([]string{"check-config", "--web.config.file", f}, &out, &errb); code != 1 ||
			!strings.Contains(errb.String(), "--web.config.file") {
			t.Errorf("%s: exit %d, %q; want 1 naming --web.config.file", f, code, errb.String())
		}
	}
}
