package history

// This file adapts the two drivers to the few calls the queries need, so
// the queries are written once: pgx (through a pgxpool.Pool, statements
// cached per connection) and database/sql (SQLite). Both accept $1
// placeholders. phonebook has the same adapter: the packages share no code
// (phonebook may depend on nothing in the module).

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

type conn interface {
	exec(ctx context.Context, q string, args ...any) (int64, error)
	query(ctx context.Context, q string, args ...any) (rows, func(), error)
	queryRow(ctx context.Context, q string, args ...any) func(dest ...any) error
	// inTx runs fn in a transaction, committed when fn returns nil.
	inTx(ctx context.Context, fn func(conn) error) error
	postgres() bool
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

func (c pgConn) exec(ctx context.Context, q string, args ...any) (int64, error) {
	if c.tx != nil {
		t, err := c.tx.Exec(ctx, q, args...)
		return t.RowsAffected(), err
	}
	t, err := c.pool.Exec(ctx, q, args...)
	return t.RowsAffected(), err
}

func (c pgConn) query(ctx context.Context, q string, args ...any) (rows, func(), error) {
	r, err := c.q().Query(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	return r, r.Close, nil
}

func (c pgConn) queryRow(ctx context.Context, q string, args ...any) func(dest ...any) error {
	row := c.q().QueryRow(ctx, q, args...)
	return func(dest ...any) error {
		err := row.Scan(dest...)
		if errors.Is(err, pgx.ErrNoRows) {
			return errNoRows
		}
		return err
	}
}

func (c pgConn) inTx(ctx context.Context, fn func(conn) error) error {
	if c.tx != nil {
		return fn(c)
	}
	return pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error { return fn(pgConn{pool: c.pool, tx: tx}) })
}

func (pgConn) postgres() bool { return true }

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

func (c sqlConn) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := c.r().ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c sqlConn) query(ctx context.Context, q string, args ...any) (rows, func(), error) {
	r, err := c.r().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	return r, func() { r.Close() }, nil
}

func (c sqlConn) queryRow(ctx context.Context, q string, args ...any) func(dest ...any) error {
	row := c.r().QueryRowContext(ctx, q, args...)
	return func(dest ...any) error {
		err := row.Scan(dest...)
		if errors.Is(err, sql.ErrNoRows) {
			return errNoRows
		}
		return err
	}
}

func (c sqlConn) inTx(ctx context.Context, fn func(conn) error) error {
	if c.tx != nil {
		return fn(c)
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(sqlConn{db: c.db, tx: tx}); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (sqlConn) postgres() bool { return false }

// Migrations.

//go:embed migrations
var migrations embed.FS

// component names this package's rows in the shared migrations table.
const component = "history"

// MigratePostgres applies the embedded PostgreSQL migrations not applied
// yet, each in its own transaction, under an advisory lock so replicas
// starting together apply them once. It returns the versions applied.
func MigratePostgres(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	return migrate(ctx, pgConn{pool: pool}, "postgres")
}

// MigrateSQLite applies the embedded SQLite migrations not applied yet.
func MigrateSQLite(ctx context.Context, db *sql.DB) ([]int, error) {
	return migrate(ctx, sqlConn{db: db}, "sqlite")
}

func migrate(ctx context.Context, c conn, dialect string) (applied []int, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("history: migrate: %w", err)
		}
	}()
	if _, err := c.exec(ctx, `CREATE TABLE IF NOT EXISTS ctibridge_migrations (
		component text NOT NULL, version integer NOT NULL, name text NOT NULL,
		PRIMARY KEY (component, version))`); err != nil {
		return nil, err
	}
	files, err := fs.ReadDir(migrations, "migrations/"+dialect)
	if err != nil {
		return nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name() < files[j].Name() })
	for _, f := range files {
		v, err := strconv.Atoi(strings.SplitN(f.Name(), "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: no version prefix", f.Name())
		}
		body, err := migrations.ReadFile("migrations/" + dialect + "/" + f.Name())
		if err != nil {
			return nil, err
		}
		err = c.inTx(ctx, func(tx conn) error {
			if tx.postgres() {
				// Serialise concurrent starts; released at commit.
				if _, err := tx.exec(ctx, `SELECT pg_advisory_xact_lock(7242002)`); err != nil {
					return err
				}
			}
			var n int
			if err := tx.queryRow(ctx, `SELECT count(*) FROM ctibridge_migrations WHERE component = $1 AND version = $2`, component, v)(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.exec(ctx, string(body)); err != nil {
				return fmt.Errorf("%s: %w", f.Name(), err)
			}
			if _, err := tx.exec(ctx, `INSERT INTO ctibridge_migrations (component, version, name) VALUES ($1, $2, $3)`, component, v, f.Name()); err != nil {
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
