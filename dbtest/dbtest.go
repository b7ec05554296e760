// Package dbtest gives tests a real PostgreSQL server: the one named by
// CTIBRIDGE_TEST_DATABASE, else the one answering on 127.0.0.1:5432, else a
// throwaway cluster started from the installed PostgreSQL binaries (initdb
// and pg_ctl on a temporary directory and a free port) and stopped when the
// test binary exits. Each call to Postgres gets a fresh schema, dropped at
// the end of the test, so runs and parallel packages never collide.
//
// CTIBRIDGE_TEST_PG_THROWAWAY=1 skips the first two and always starts a
// throwaway cluster, so that path is exercised too.
//
// It is imported by tests only. Packages that use Postgres must call Main
// from their TestMain so that a throwaway cluster is stopped.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables read by this package.
const (
	EnvDatabase  = "CTIBRIDGE_TEST_DATABASE"
	EnvThrowaway = "CTIBRIDGE_TEST_PG_THROWAWAY"
)

// LocalDSN is the server tried when EnvDatabase is unset.
const LocalDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable&connect_timeout=2"

var (
	serverOnce sync.Once
	serverDSN  string
	serverErr  error
	cluster    *Cluster // started by server(), stopped by Main
)

// Main runs the tests and stops a throwaway cluster if one was started.
// Use it as: func TestMain(m *testing.M) { dbtest.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	if cluster != nil {
		cluster.Stop()
		cluster.Remove()
	}
	os.Exit(code)
}

// server finds or starts the PostgreSQL server, once per process.
func server() (string, error) {
	serverOnce.Do(func() {
		if os.Getenv(EnvThrowaway) == "" {
			if dsn := os.Getenv(EnvDatabase); dsn != "" {
				serverDSN = dsn
				return
			}
			if ping(LocalDSN) == nil {
				serverDSN = LocalDSN
				return
			}
		}
		c, err := StartCluster()
		if err != nil {
			serverErr = err
			return
		}
		cluster = c
		serverDSN = c.DSN()
	})
	if serverErr != nil {
		return "", serverErr
	}
	// extErr is written inside extOnce only: concurrent callers read it
	// after Do returns (serverErr used to be written here, racing with
	// the read above in parallel tests).
	extOnce.Do(func() { extErr = installExtensions(serverDSN) })
	return serverDSN, extErr
}

var (
	extOnce sync.Once
	extErr  error
)

// installExtensions puts the extensions the stores' migrations create
// (pg_trgm) into public before any test schema exists; otherwise the
// first migration would create it inside its own test schema, invisible
// to the others and dropped with it.
func installExtensions(dsn string) error {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	for range 3 {
		// Concurrent test binaries may race on it: retry.
		if _, err = c.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public"); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("dbtest: create extension pg_trgm (install postgresql-contrib): %w", err)
}

func ping(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return c.Ping(ctx)
}

// Postgres returns the DSN of a fresh, empty schema (first in the
// search_path, followed by public where extensions such as pg_trgm live)
// on the test server. The schema is dropped when the test ends. It fails
// the test, never skips it, when no server can be found or started.
func Postgres(t testing.TB) string {
	t.Helper()
	dsn, err := server()
	if err != nil {
		t.Fatalf("dbtest: no PostgreSQL for the tests: %v", err)
	}
	return Schema(t, dsn)
}

// Schema creates a fresh schema on the server at dsn and returns a DSN
// using it; the schema is dropped when the test ends.
func Schema(t testing.TB, dsn string) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("dbtest: connect: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("dbtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return // the server was stopped by the test
		}
		defer c.Close(ctx)
		c.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
	})
	return withParam(dsn, "search_path", name+",public")
}

// withParam adds a runtime parameter to a URL or keyword/value DSN.
func withParam(dsn, key, value string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "='" + value + "'"
}

// Cluster is a throwaway PostgreSQL cluster in a temporary directory.
type Cluster struct {
	bin  string // directory of initdb, pg_ctl
	dir  string // parent: data/ and the socket live here
	port int
	as   string // user to run the binaries as ("" for the current one)
}

// StartCluster initialises and starts a cluster from the newest
// /usr/lib/postgresql/*/bin (or PATH). As root it runs the binaries as
// the postgres user, since initdb refuses to run as root.
func StartCluster() (*Cluster, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ctibridge-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, errors.New("dbtest: running as root and there is no postgres user to run initdb as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err == nil {
			err = os.Chown(dir, uid, gid)
		}
		c.as = "postgres"
	}
	if c.port, err = freePort(); err != nil {
		c.Remove()
		return nil, err
	}
	if out, err := c.run("initdb", "-D", c.data(), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"); err != nil {
		c.Remove()
		return nil, fmt.Errorf("dbtest: initdb: %w\n%s", err, out)
	}
	if err := c.Start(); err != nil {
		c.Remove()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// DSN is the cluster's postgres database as the postgres superuser.
func (c *Cluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", c.port)
}

// Start starts (or restarts) the server and waits until it accepts
// connections.
func (c *Cluster) Start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off", c.port, c.dir)
	if out, err := c.run("pg_ctl", "-D", c.data(), "-o", opts, "-l", filepath.Join(c.dir, "log"), "-w", "-t", "30", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		return fmt.Errorf("dbtest: pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	return nil
}

// Stop stops the server (fast mode: connections are closed at once).
func (c *Cluster) Stop() error {
	if out, err := c.run("pg_ctl", "-D", c.data(), "-m", "fast", "-w", "stop"); err != nil {
		return fmt.Errorf("dbtest: pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// Remove deletes the cluster's directory; Stop it first.
func (c *Cluster) Remove() { os.RemoveAll(c.dir) }

func (c *Cluster) run(prog string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, prog)
	var cmd *exec.Cmd
	if c.as != "" {
		cmd = exec.Command("runuser", append([]string{"-u", c.as, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = c.dir
	return cmd.CombinedOutput()
}

// findBin returns the directory holding initdb and pg_ctl.
func findBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("dbtest: no PostgreSQL server found (set " + EnvDatabase +
		", run one on 127.0.0.1:5432, or install the Debian package postgresql so initdb and pg_ctl exist)")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// NewCluster starts a throwaway cluster for one test (one the test may
// stop and start, e.g. to test an outage) and removes it when the test
// ends. It returns the cluster and the DSN of a fresh schema on it.
func NewCluster(t testing.TB) (*Cluster, string) {
	t.Helper()
	c, err := StartCluster()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(); c.Remove() })
	return c, withParam(c.DSN(), "search_path", "public")
}

// IsThrowaway reports whether the shared test server is a throwaway
// cluster (for logs).
func IsThrowaway() bool { return cluster != nil }

// Describe names the server the tests use, without credentials.
func Describe() string {
	dsn, err := server()
	if err != nil {
		return err.Error()
	}
	if u, err := url.Parse(dsn); err == nil && u.Host != "" {
		return strings.TrimSpace(u.Host + u.Path)
	}
	return "(keyword/value DSN)"
}
