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
// SQLite and Pool open a store's database, migrated, for one test.
//
// It is imported by tests only. Packages that use Postgres must call Main
// from their TestMain so that a throwaway cluster is stopped.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"

	"github.com/ctibridge/ctibridge/dbtest/pgcluster"
	"github.com/ctibridge/ctibridge/sqldb"
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
type Cluster = pgcluster.Cluster

// StartCluster initialises and starts a cluster from the newest
// /usr/lib/postgresql/*/bin (or PATH), with durability off for speed
// (fsync, synchronous_commit, full_page_writes).
func StartCluster() (*Cluster, error) {
	c, err := pgcluster.Start(pgcluster.Config{
		Settings: []string{"fsync=off", "synchronous_commit=off", "full_page_writes=off"},
	})
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		return nil, errors.New("dbtest: no PostgreSQL server found (set " + EnvDatabase +
			", run one on 127.0.0.1:5432, or install the Debian package postgresql so initdb and pg_ctl exist)")
	}
	if err != nil {
		return nil, fmt.Errorf("dbtest: %w", err)
	}
	return c, nil
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

// SQLite opens a SQLite file in the test's temporary directory with the
// settings the stores use (WAL, a busy timeout, transactions that take
// the write lock at once), applies schema's migrations and closes the
// database when the test ends.
func SQLite(t testing.TB, schema sqldb.Schema) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), schema.Component+".db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := schema.MigrateSQLite(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

// Pool opens a pgx pool on dsn (adjusted by configure, when not nil),
// applies schema's migrations and closes the pool when the test ends.
func Pool(t testing.TB, dsn string, schema sqldb.Schema, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := schema.MigratePostgres(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return pool
}

// WaitFor polls cond every 10 ms and fails the test when it has not held
// within 30 s (a database coming back, a spool drained); what names the
// condition in the failure.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
