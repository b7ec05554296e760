package history

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"

	"github.com/ctibridge/ctibridge/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type backend struct {
	name string
	open func(t testing.TB, cfg Config) *SQLStore
}

var backends = []backend{
	{"sqlite", func(t testing.TB, cfg Config) *SQLStore { return NewSQLite(openSQLite(t), cfg) }},
	{"postgres", func(t testing.TB, cfg Config) *SQLStore { return NewPostgres(openPostgres(t, dbtest.Postgres(t)), cfg) }},
}

func openSQLite(t testing.TB) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "h.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := MigrateSQLite(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

func openPostgres(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := MigratePostgres(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return pool
}

func dbtestPostgres(t testing.TB) string { return dbtest.Postgres(t) }
