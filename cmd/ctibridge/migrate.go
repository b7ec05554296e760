package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // the embedded default store, pure Go

	"github.com/ctibridge/ctibridge/auth/authdb"
	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/nethcti"
	"github.com/ctibridge/ctibridge/phonebook"
	"github.com/ctibridge/ctibridge/sqldb"
)

// storeDB is the opened database behind the phonebook and history stores:
// a pgx pool or an embedded SQLite file.
type storeDB struct {
	pool *pgxpool.Pool // set for postgres://
	sql  *sql.DB       // set for sqlite:
	desc string        // for logs, without credentials
}

// defaultDSN is --db's default: the embedded store in the data directory.
func defaultDSN(dataDir string) string {
	return "sqlite:" + filepath.Join(dataDir, "ctibridge.db")
}

// openDB opens --db: "postgres://..." (or postgresql://, DATABASE_URL
// style, pool settings from the URL's pool_* parameters override ours)
// or "sqlite:PATH"; "" means defaultDSN(dataDir).
func openDB(ctx context.Context, dsn, dataDir string) (*storeDB, error) {
	if dsn == "" {
		dsn = defaultDSN(dataDir)
	}
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			return nil, fmt.Errorf("db: %w", err)
		}
		if !strings.Contains(dsn, "pool_max_conns") {
			cfg.MaxConns = 16
		}
		if !strings.Contains(dsn, "pool_min_conns") {
			cfg.MinConns = 2
		}
		if !strings.Contains(dsn, "pool_max_conn_idle_time") {
			cfg.MaxConnIdleTime = 5 * time.Minute
		}
		if !strings.Contains(dsn, "pool_max_conn_lifetime") {
			cfg.MaxConnLifetime = time.Hour
		}
		cfg.HealthCheckPeriod = 15 * time.Second
		if cfg.ConnConfig.ConnectTimeout == 0 {
			cfg.ConnConfig.ConnectTimeout = 5 * time.Second
		}
		// Prepared statements cached per connection (pgx's default mode,
		// stated here on purpose); behind PgBouncer in transaction mode
		// use default_query_exec_mode=exec in the URL instead.
		if !strings.Contains(dsn, "default_query_exec_mode") {
			cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
			cfg.ConnConfig.StatementCacheCapacity = 256
		}
		if _, ok := cfg.ConnConfig.RuntimeParams["statement_timeout"]; !ok {
			cfg.ConnConfig.RuntimeParams["statement_timeout"] = "30000" // ms: no query runs away
		}
		if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
			cfg.ConnConfig.RuntimeParams["application_name"] = "ctibridge"
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("db: %w", err)
		}
		return &storeDB{pool: pool, desc: fmt.Sprintf("postgres %s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)}, nil
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite:"), "//")
		if path == "" {
			return nil, errors.New("db: sqlite: no path")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("db: %w", err)
		}
		// WAL: readers never wait for the writer; busy_timeout: writers
		// wait for each other; _txlock=immediate: a transaction takes the
		// write lock at BEGIN, so it never fails half-way with BUSY.
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate")
		if err != nil {
			return nil, fmt.Errorf("db: %w", err)
		}
		db.SetMaxOpenConns(8)
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			return nil, fmt.Errorf("db: %s: %w", path, err)
		}
		return &storeDB{sql: db, desc: "sqlite " + path}, nil
	}
	return nil, fmt.Errorf("db: %q: want postgres://... or sqlite:PATH", redact(dsn))
}

func redact(dsn string) string {
	if i := strings.Index(dsn, "@"); i >= 0 {
		if j := strings.Index(dsn, "://"); j >= 0 && j < i {
			return dsn[:j+3] + "...@" + dsn[i+1:]
		}
	}
	return dsn
}

// migrate applies the phonebook and history migrations and returns a
// line per component for logs.
func (d *storeDB) migrate(ctx context.Context) ([]string, error) {
	var out []string
	for _, c := range []struct {
		name string
		pg   func(context.Context, *pgxpool.Pool) ([]int, error)
		lite func(context.Context, *sql.DB) ([]int, error)
	}{
		{"phonebook", phonebook.Schema.MigratePostgres, phonebook.Schema.MigrateSQLite},
		{"history", history.Schema.MigratePostgres, history.Schema.MigrateSQLite},
		{"sessions", authdb.Schema.MigratePostgres, authdb.Schema.MigrateSQLite},
		{"nethcti", nethcti.Schema.MigratePostgres, nethcti.Schema.MigrateSQLite},
	} {
		var v []int
		var err error
		if d.pool != nil {
			v, err = c.pg(ctx, d.pool)
		} else {
			v, err = c.lite(ctx, d.sql)
		}
		if err != nil {
			return out, err
		}
		out = append(out, fmt.Sprintf("%s: applied %v", c.name, v))
	}
	return out, nil
}

// conn returns the database as a sqldb.Conn.
func (d *storeDB) conn() sqldb.Conn {
	if d.pool != nil {
		return sqldb.Pgx(d.pool)
	}
	return sqldb.SQL(d.sql)
}

// Close closes the pool or the file. Call it last (after the recorder's
// Run has returned).
func (d *storeDB) Close() {
	if d.pool != nil {
		d.pool.Close()
	}
	if d.sql != nil {
		d.sql.Close()
	}
}

// runMigrate is `ctibridge migrate [--db DSN] [--data-dir DIR]`: it
// applies the embedded schema migrations and exits. serve applies them at
// start too; this is for deployments that migrate as a separate step.
func runMigrate(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	var dsn, dataDir string
	s := &settings{}
	s.str(&dataDir, "data-dir", "./ctibridge-data", "data directory (for the default embedded database)")
	s.str(&dsn, "db", "", "database: postgres://... or sqlite:PATH (default sqlite:<data-dir>/ctibridge.db)")
	if err := s.parse("migrate", args, getenv, stderr); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	db, err := openDB(ctx, dsn, dataDir)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer db.Close()
	lines, err := db.migrate(ctx)
	for _, l := range lines {
		fmt.Fprintf(stderr, "migrate: %s: %s\n", db.desc, l)
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
