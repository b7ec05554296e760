package directory

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// slapd is a throwaway OpenLDAP server: its own config (slapd.conf), an
// mdb database seeded with slapadd, a TLS certificate from a test CA, on
// loopback ports.
type slapd struct {
	dir       string
	conf      string
	ldapsURL  string // ldaps://127.0.0.1:port
	ldapURL   string // ldap://127.0.0.1:port (StartTLS)
	tls       *tls.Config
	cmd       *exec.Cmd
	ldapsPort int
	ldapPort  int
}

const slapdBin = "/usr/sbin/slapd"

// startSlapd starts slapd seeded with ldif. It fails (never skips) when
// slapd is missing: scripts/test.sh installs it.
func startSlapd(t *testing.T, ldif string) *slapd {
	t.Helper()
	for _, bin := range []string{slapdBin, "/usr/sbin/slapadd"} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s is missing: install the Debian packages slapd and ldap-utils (scripts/test.sh does)", bin)
		}
	}
	s := &slapd{dir: t.TempDir()}
	s.tls = writeTestPKI(t, s.dir)
	if err := os.Mkdir(filepath.Join(s.dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	s.conf = filepath.Join(s.dir, "slapd.conf")
	conf := fmt.Sprintf(`include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile %[1]s/slapd.pid
TLSCertificateFile %[1]s/cert.pem
TLSCertificateKeyFile %[1]s/key.pem
access to attrs=userPassword by anonymous auth by * none
access to * by * read
database mdb
maxsize 10485760
suffix "dc=example,dc=com"
rootdn "cn=admin,dc=example,dc=com"
rootpw admin-pw
directory %[1]s/data
`, s.dir)
	if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	seed := filepath.Join(s.dir, "seed.ldif")
	if err := os.WriteFile(seed, []byte(ldif), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/usr/sbin/slapadd", "-f", s.conf, "-l", seed).CombinedOutput(); err != nil {
		t.Fatalf("slapadd: %v\n%s", err, out)
	}
	s.ldapsPort, s.ldapPort = freePort(t), freePort(t)
	s.ldapsURL = "ldaps://127.0.0.1:" + strconv.Itoa(s.ldapsPort)
	s.ldapURL = "ldap://127.0.0.1:" + strconv.Itoa(s.ldapPort)
	s.start(t)
	t.Cleanup(s.stop)
	return s
}

func (s *slapd) start(t *testing.T) {
	t.Helper()
	s.cmd = exec.Command(slapdBin, "-f", s.conf, "-h", s.ldapsURL+"/ "+s.ldapURL+"/", "-d", "0")
	s.cmd.Stdout, s.cmd.Stderr = os.Stderr, os.Stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("slapd: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.ldapsPort))
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.stop()
			t.Fatalf("slapd did not listen: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends slapd (the directory going down); start brings it back.
func (s *slapd) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeTestPKI writes a CA-signed certificate for 127.0.0.1 to
// dir/cert.pem and dir/key.pem and returns a client config trusting the CA.
func writeTestPKI(t *testing.T, dir string) *tls.Config {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ctibridge test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}
