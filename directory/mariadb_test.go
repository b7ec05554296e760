package directory

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

// mariadb is a throwaway MariaDB server: mariadb-install-db into a
// temporary directory, mariadbd on its own socket and loopback port (never
// the machine's server on 3306), stopped at the end of the test.
type mariadb struct {
	dir, sock string
	port      int
	cmd       *exec.Cmd
}

// startMariaDB starts a server; it fails (never skips) when MariaDB is
// missing: scripts/test.sh installs it.
func startMariaDB(t *testing.T) *mariadb {
	t.Helper()
	for _, bin := range []string{"/usr/sbin/mariadbd", "/usr/bin/mariadb-install-db"} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s is missing: install the Debian package mariadb-server (scripts/test.sh does)", bin)
		}
	}
	dir, err := os.MkdirTemp("", "ctib-mdb-") // short: the socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	m := &mariadb{dir: dir, sock: filepath.Join(dir, "s.sock"), port: freePort(t)}
	out, err := exec.Command("/usr/bin/mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(dir, "data"),
		"--user=root", "--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	m.cmd = exec.Command("/usr/sbin/mariadbd", "--no-defaults", "--datadir="+filepath.Join(dir, "data"), "--socket="+m.sock,
		"--port="+strconv.Itoa(m.port), "--bind-address=127.0.0.1", "--user=root", "--skip-log-bin",
		"--pid-file="+filepath.Join(dir, "pid"), "--log-error="+filepath.Join(dir, "err.log"), "--innodb-buffer-pool-size=16M")
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("mariadbd: %v", err)
	}
	t.Cleanup(m.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		db, err := sql.Open("mysql", "root@unix("+m.sock+")/")
		if err == nil {
			err = db.Ping()
			db.Close()
		}
		if err == nil {
			return m
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "err.log"))
			t.Fatalf("mariadbd did not start: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dsn is the root DSN of database db over the socket.
func (m *mariadb) dsn(db string) string { return "root@unix(" + m.sock + ")/" + db }

func (m *mariadb) stop() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	m.cmd.Process.Kill()
	m.cmd.Wait()
	m.cmd = nil
}

// exec runs statements as root, failing the test on error.
func (m *mariadb) exec(t *testing.T, db string, stmts ...string) {
	t.Helper()
	c, err := sql.Open("mysql", m.dsn(db))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, s := range stmts {
		if _, err := c.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}
