package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // the embedded default store, pure Go
)

// DB is an opened database behind the stores (Open):
// a pgx pool or an embedded SQLite file.
type DB struct {
	Pool *pgxpool.Pool // set for postgres://
	SQL  *sql.DB       // set for sqlite:
	Desc string        // for logs, without credentials
}

// DefaultDSN is Open's default: the embedded store in the data directory.
func DefaultDSN(dataDir string) string {
	return "sqlite:" + filepath.Join(dataDir, "ctibridge.db")
}

// Open opens a database by its DSN: "postgres://..." (or postgresql://, DATABASE_URL
// style, pool settings from the URL's pool_* parameters override ours)
// or "sqlite:PATH"; "" means DefaultDSN(dataDir).
func Open(ctx context.Context, dsn, dataDir string) (*DB, error) {
	if dsn == "" {
		dsn = DefaultDSN(dataDir)
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
		return &DB{Pool: pool, Desc: fmt.Sprintf("postgres %s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)}, nil
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
		return &DB{SQL: db, Desc: "sqlite " + path}, nil
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

// Conn is the database as a Conn.
func (d *DB) Conn() Conn {
	if d.Pool != nil {
		return Pgx(d.Pool)
	}
	return SQL(d.SQL)
}

// Close closes the pool or the file. Call it last (after the recorder's
// Run has returned).
func (d *DB) Close() {
	if d.Pool != nil {
		d.Pool.Close()
	}
	if d.SQL != nil {
		d.SQL.Close()
	}
}
