package httpserve

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeTestCert writes a self-signed certificate with the given serial
// number and its key to certFile and keyFile.
func writeTestCert(t *testing.T, certFile, keyFile string, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "ctibridge.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"ctibridge.test"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReloadTLS: after ReloadTLS new connections get the renewed
// certificate while an open connection goes on with the old one; a bad
// file keeps the certificate being served.
func TestReloadTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeTestCert(t, certFile, keyFile, 1)
	s, err := New(Config{Addr: "127.0.0.1:0", TLSCert: certFile, TLSKey: keyFile},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Shutdown(t.Context())
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	})
	newClient := func() *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}}
	}
	url := "https://" + ln.Addr().String() + "/"
	serial := func(c *http.Client) int64 {
		t.Helper()
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
			t.Fatalf("body %q", b)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	old := newClient()
	if got := serial(old); got != 1 {
		t.Fatalf("serial %d, want 1", got)
	}

	writeTestCert(t, certFile, keyFile, 2)
	if err := s.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if got := serial(newClient()); got != 2 {
		t.Errorf("new connection after reload: serial %d, want 2", got)
	}
	if got := serial(old); got != 1 {
		t.Errorf("open connection after reload: serial %d, want 1 (kept, not dropped)", got)
	}

	os.WriteFile(keyFile, []byte("not a key"), 0o600)
	if err := s.ReloadTLS(); err == nil {
		t.Error("a broken key reloaded without error")
	}
	if got := serial(newClient()); got != 2 {
		t.Errorf("after a failed reload: serial %d, want 2 (the last good one)", got)
	}
}

func TestReloadTLSWithoutTLS(t *testing.T) {
	s, err := New(Config{}, http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadTLS(); err != nil {
		t.Error(err)
	}
}
