package phonebook

import (
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ctibridge/ctibridge/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var italy = Normalizer{Country: "39", Trunk: "0", Intl: "00"}

// backend opens a fresh, migrated store.
type backend struct {
	name string
	open func(t testing.TB) Store
}

var backends = []backend{
	{"sqlite", func(t testing.TB) Store { return NewSQLite(openSQLite(t), italy) }},
	{"postgres", func(t testing.TB) Store { return NewPostgres(openPostgres(t), italy) }},
}

func openSQLite(t testing.TB) *sql.DB { return dbtest.SQLite(t, Schema) }

func openPostgres(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return openPostgresDSN(t, dbtest.Postgres(t))
}

func openPostgresDSN(t testing.TB, dsn string) *pgxpool.Pool {
	return dbtest.Pool(t, dsn, Schema, func(cfg *pgxpool.Config) {
		cfg.MaxConns = 16
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	})
}
