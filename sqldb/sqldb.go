package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNoRows is what a QueryRow scan returns when no row matched, whatever
// the driver.
var ErrNoRows = errors.New("sqldb: no rows")

// Pgx returns a Conn over a pgx pool.
func Pgx(pool *pgxpool.Pool) Conn { return pgConn{pool: pool} }

// SQL returns a Conn over a database/sql handle (SQLite).
func SQL(db *sql.DB) Conn { return sqlConn{db: db} }

type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

type Conn interface {
	Exec(ctx context.Context, q string, args ...any) (int64, error)
	Query(ctx context.Context, q string, args ...any) (Rows, func(), error)
	QueryRow(ctx context.Context, q string, args ...any) func(dest ...any) error
	// InTx runs fn in a transaction, committed when fn returns nil.
	InTx(ctx context.Context, fn func(Conn) error) error
	Postgres() bool
}

// pgx

type pgConn struct {
	pool *pgxpool.Pool
	tx   pgx.Tx // set inside inTx
}

func (c pgConn) q() interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
} {
	if c.tx != nil {
		return c.tx
	}
	return c.pool
}

func (c pgConn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	if c.tx != nil {
		t, err := c.tx.Exec(ctx, q, args...)
		return t.RowsAffected(), classify(err)
	}
	t, err := c.pool.Exec(ctx, q, args...)
	return t.RowsAffected(), classify(err)
}

func (c pgConn) Query(ctx context.Context, q string, args ...any) (Rows, func(), error) {
	r, err := c.q().Query(ctx, q, args...)
	if err != nil {
		return nil, nil, classify(err)
	}
	return downRows{r}, r.Close, nil
}

func (c pgConn) QueryRow(ctx context.Context, q string, args ...any) func(dest ...any) error {
	return scanRow(c.q().QueryRow(ctx, q, args...).Scan, pgx.ErrNoRows)
}

func (c pgConn) InTx(ctx context.Context, fn func(Conn) error) error {
	if c.tx != nil {
		return fn(c)
	}
	return classify(pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error { return fn(pgConn{pool: c.pool, tx: tx}) }))
}

func (pgConn) Postgres() bool { return true }

// database/sql (SQLite)

type sqlConn struct {
	db *sql.DB
	tx *sql.Tx
}

type sqlRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (c sqlConn) r() sqlRunner {
	if c.tx != nil {
		return c.tx
	}
	return c.db
}

func (c sqlConn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := c.r().ExecContext(ctx, q, args...)
	if err != nil {
		return 0, classify(err)
	}
	return res.RowsAffected()
}

func (c sqlConn) Query(ctx context.Context, q string, args ...any) (Rows, func(), error) {
	r, err := c.r().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, classify(err)
	}
	return downRows{r}, func() { r.Close() }, nil
}

func (c sqlConn) QueryRow(ctx context.Context, q string, args ...any) func(dest ...any) error {
	return scanRow(c.r().QueryRowContext(ctx, q, args...).Scan, sql.ErrNoRows)
}

// scanRow is a driver's row scan as Conn.QueryRow returns it: the
// driver's noRows error becomes ErrNoRows, an outage ErrUnavailable.
func scanRow(scan func(dest ...any) error, noRows error) func(dest ...any) error {
	return func(dest ...any) error {
		err := scan(dest...)
		if errors.Is(err, noRows) {
			return ErrNoRows
		}
		return classify(err)
	}
}

func (c sqlConn) InTx(ctx context.Context, fn func(Conn) error) error {
	if c.tx != nil {
		return fn(c)
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return classify(err)
	}
	if err := fn(sqlConn{db: c.db, tx: tx}); err != nil {
		tx.Rollback()
		return err
	}
	return classify(tx.Commit())
}

func (sqlConn) Postgres() bool { return false }

// Migrations.

// Migrate applies the migrations in fsys under dir (files named
// "<version>_<name>.sql", applied in version order) that the shared
// ctibridge_migrations table does not list for component, each in its own
// transaction; on PostgreSQL under the advisory lock lockID, so replicas
// starting together apply them once. It returns the versions applied.
func Migrate(ctx context.Context, c Conn, fsys fs.FS, dir, component string, lockID int64) (applied []int, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("%s: migrate: %w", component, err)
		}
	}()
	if _, err := c.Exec(ctx, `CREATE TABLE IF NOT EXISTS ctibridge_migrations (
		component text NOT NULL, version integer NOT NULL, name text NOT NULL,
		PRIMARY KEY (component, version))`); err != nil {
		return nil, err
	}
	files, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name() < files[j].Name() })
	for _, f := range files {
		v, err := strconv.Atoi(strings.SplitN(f.Name(), "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: no version prefix", f.Name())
		}
		body, err := fs.ReadFile(fsys, dir+"/"+f.Name())
		if err != nil {
			return nil, err
		}
		err = c.InTx(ctx, func(tx Conn) error {
			if tx.Postgres() {
				// Serialise concurrent starts; released at commit.
				if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockID); err != nil {
					return err
				}
			}
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM ctibridge_migrations WHERE component = $1 AND version = $2`, component, v)(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return fmt.Errorf("%s: %w", f.Name(), err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO ctibridge_migrations (component, version, name) VALUES ($1, $2, $3)`, component, v, f.Name()); err != nil {
				return err
			}
			applied = append(applied, v)
			return nil
		})
		if err != nil {
			return applied, err
		}
	}
	return applied, nil
}

// Schema is one component's embedded, versioned migrations: the files
// under migrations/postgres and migrations/sqlite of FS, listed under
// Component in the shared migrations table and applied on PostgreSQL
// under the advisory lock Lock (one number per component).
type Schema struct {
	FS        fs.FS
	Component string
	Lock      int64
}

// MigratePostgres applies the PostgreSQL migrations not applied yet, each
// in its own transaction, under the advisory lock so replicas starting
// together apply them once. It returns the versions applied.
func (s Schema) MigratePostgres(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	return Migrate(ctx, Pgx(pool), s.FS, "migrations/postgres", s.Component, s.Lock)
}

// MigrateSQLite applies the SQLite migrations not applied yet.
func (s Schema) MigrateSQLite(ctx context.Context, db *sql.DB) ([]int, error) {
	return Migrate(ctx, SQL(db), s.FS, "migrations/sqlite", s.Component, s.Lock)
}

// Pool returns the pgx pool under c, or nil when c is not PostgreSQL: for
// what only pgx does, such as COPY.
func Pool(c Conn) *pgxpool.Pool {
	switch c := c.(type) {
	case pgConn:
		return c.pool
	case gateConn:
		return Pool(c.g.c)
	}
	return nil
}
