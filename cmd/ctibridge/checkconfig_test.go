package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
)

// writeCert writes a self-signed certificate valid until notAfter and its
// key into dir, returning their paths.
func writeCert(t *testing.T, dir string, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ctibridge.test"},
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter, DNSNames: []string{"ctibridge.test"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func testUsersFile(t *testing.T, dir string) string {
	t.Helper()
	h, err := auth.HashPassword("pw", 4)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "users.yaml")
	data := "users:\n  - username: alice\n    password_hash: \"" + h + "\"\n    endpoints: [\"201\"]\n"
	if err := os.WriteFile(p, []byte(data), 0o640); err != nil {
		t.Fatal(err)
	}
	return p
}

func checkConfig(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runCheckConfig(args, func(k string) string { return env[k] }, &out, &errOut)
	return out.String() + errOut.String(), err
}

func TestCheckConfigOK(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir, time.Now().Add(365*24*time.Hour))
	users := testUsersFile(t, dir)
	cfg := filepath.Join(dir, "ctibridge.yaml")
	os.WriteFile(cfg, []byte("ami: pbx.example.org:5038\nami-user: ctibridge\ntls-cert: "+cert+"\ntls-key: "+key+
		"\nusers: "+users+"\ndata-dir: "+dir+"\ndb: postgres://u:p@db.example.org/cti\n"), 0o640)
	out, err := checkConfig(t, map[string]string{"CTIBRIDGE_AMI_SECRET": "s3cret"}, "--config", cfg)
	if err != nil {
		t.Fatalf("err = %v\n%s", err, out)
	}
	if want := "ok: " + cfg + " (1 users)\n"; out != want {
		t.Errorf("output %q, want %q", out, want)
	}
}

// TestCheckConfigReportsEveryProblem: one run names every problem, each
// with its file (and line), key and a hint, and fails.
func TestCheckConfigReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	h, _ := auth.HashPassword("pw", 4)
	users := filepath.Join(dir, "users.yaml")
	os.WriteFile(users, []byte("users:\n  - username: alice\n    password_hash: \""+h+"\"\n    role: boss\n  - username: bob\n    password_hash: plain\n"), 0o644)
	cfg := filepath.Join(dir, "ctibridge.yaml")
	os.WriteFile(cfg, []byte(`ami-usr: ctibridge
reconcile-every: soon
log-level: loud
users: `+users+`
tls-cert: `+dir+`/missing.pem
tls-key: `+dir+`
http: 8080
queue-numbers: support:600
popup-link: javascript:alert({number})
`), 0o640)
	out, err := checkConfig(t, map[string]string{"CTIBRIDGE_AMI_TLS": "maybe"}, "--config", cfg)
	if err == nil {
		t.Fatalf("no error; output:\n%s", out)
	}
	want := []string{
		`error: ` + cfg + `:1: key "ami-usr": unknown key (hint: did you mean "ami-user"?)`,
		`error: ` + cfg + `:2: key "reconcile-every": not a duration (like 30s, 5m): "soon" (hint: period of the drift check`,
		`error: CTIBRIDGE_AMI_TLS: not a boolean (true or false): "maybe" (hint: connect to the manager over TLS`,
		`error: ` + cfg + `: key "ami-user": required (hint: `,
		`error: ` + cfg + `: key "ami-secret": required (hint: `,
		`error: ` + cfg + `:7: key "http": "8080": address 8080: missing port in address (hint: host:port`,
		`error: ` + cfg + `:3: key "log-level": unknown level "loud" (hint: debug, info, warn or error)`,
		`error: ` + cfg + `:8: key "queue-numbers": queue-numbers: "support:600" is not name=number (support=600)`,
		`error: ` + cfg + `:9: key "popup-link": the pop-up link must be an absolute http:// or https:// URL (hint: https://`,
		`error: ` + cfg + `:5: key "tls-cert": cannot read: open ` + dir + `/missing.pem: no such file or directory (hint: check the path)`,
		`error: ` + cfg + `:6: key "tls-key": cannot read: read ` + dir + `: is a directory`,
		`error: ` + users + `:4: user "alice": key "role": unknown role "boss" (want user, operator or admin) (hint: user, operator or admin)`,
		`error: ` + users + `:6: user "bob": key "password_hash": not a bcrypt hash`,
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, w)
		}
		if !found {
			t.Errorf("missing line starting with\n  %s", w)
		}
	}
	if len(lines) != len(want) {
		t.Errorf("got %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	if !strings.Contains(err.Error(), "13 error(s)") {
		t.Errorf("err = %v", err)
	}
}

func TestCheckConfigWarnings(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir, time.Now().Add(3*24*time.Hour))
	os.Chmod(key, 0o644)
	users := filepath.Join(dir, "users.yaml")
	os.WriteFile(users, []byte("users: []\n"), 0o644)
	env := map[string]string{"CTIBRIDGE_AMI_USER": "u", "CTIBRIDGE_AMI_SECRET": "s"}
	out, err := checkConfig(t, env, "--users", users, "--tls-cert", cert, "--tls-key", key)
	if err != nil {
		t.Fatalf("warnings made it fail: %v\n%s", err, out)
	}
	for _, w := range []string{
		"warning: --tls-key: private key readable by everyone",
		"warning: --tls-cert: certificate expires on ",
		`warning: ` + users + `: key "users": no users: nobody can log in`,
		"readable by everyone, and it holds password hashes",
		"ok: flags and environment (0 users), 4 warning(s)",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}

	// Expired is an error; no users file at all is a warning.
	cert, key = writeCert(t, t.TempDir(), time.Now().Add(-time.Hour))
	out, err = checkConfig(t, env, "--tls-cert", cert, "--tls-key", key)
	if err == nil || !strings.Contains(out, "error: --tls-cert: certificate expired on") ||
		!strings.Contains(out, "warning: --users: no users file: nobody can log in") {
		t.Errorf("err = %v\n%s", err, out)
	}
}

// TestCheckConfigServeLine: what serve stops on is the first error, on one
// line naming the file and the key.
func TestCheckConfigServeLine(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("ami-user: u\nami-secret: s\nusers: /nonexistent/users.yaml\n"), 0o600)
	var c serveConfig
	st := serveSettings(&c)
	if err := st.Parse("serve", []string{"--config", cfg}, func(string) string { return "" }, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	_, probs := checkServe(&c, st)
	err := firstError(probs)
	want := cfg + `:3: key "users": cannot read the users file: open /nonexistent/users.yaml: no such file or directory (hint: check the path)`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant  %s", err, want)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Error("more than one line")
	}
}

func TestCheckConfigUnusableFile(t *testing.T) {
	cfg := writeFile(t, "c.yaml", "ami: [unclosed\n")
	out, err := checkConfig(t, nil, "--config", cfg)
	if err == nil || !strings.Contains(out, "error: config "+cfg+": yaml:") {
		t.Errorf("err = %v\n%s", err, out)
	}
	out, err = checkConfig(t, nil, "--no-such-flag")
	if err == nil || !strings.Contains(out, "flag provided but not defined: -no-such-flag") {
		t.Errorf("err = %v\n%s", err, out)
	}
}

func TestCheckConfigPrefixes(t *testing.T) {
	var got []netip.Prefix
	st := &settings{}
	prefixes(st, &got, "trusted-proxies", "", "reverse proxies")
	cfg := writeFile(t, "c.yaml", "trusted-proxies: 127.0.0.1, 10.0.0.0/8\n")
	if err := st.Parse("serve", []string{"--config", cfg}, func(string) string { return "" }, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1] != netip.MustParsePrefix("10.0.0.0/8") {
		t.Errorf("got %v", got)
	}
	cfg = writeFile(t, "c.yaml", "trusted-proxies: nginx.local\n")
	err := st.Parse("serve", []string{"--config", cfg}, func(string) string { return "" }, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `:1: key "trusted-proxies": rest: trusted proxies: "nginx.local"`) {
		t.Errorf("err = %v", err)
	}
}
