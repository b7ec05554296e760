package history

import (
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

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

func openSQLite(t testing.TB) *sql.DB { return dbtest.SQLite(t, Schema) }

func openPostgres(t testing.TB, dsn string) *pgxpool.Pool {
	return dbtest.Pool(t, dsn, Schema, func(cfg *pgxpool.Config) { cfg.MaxConns = 8 })
}
