package phonebook

// The queries run on PostgreSQL and SQLite alike through sqldb.

import (
	"context"
	"database/sql"
	"embed"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ctibridge/ctibridge/sqldb"
)

type (
	conn = sqldb.Conn
	rows = sqldb.Rows
)

//go:embed migrations
var migrations embed.FS

// schema lists this package's rows as phonebook in the shared migrations
// table; its lock number serialises concurrent starts on PostgreSQL.
var schema = sqldb.Schema{FS: migrations, Component: "phonebook", Lock: 7242001}

// MigratePostgres applies the embedded PostgreSQL migrations not applied
// yet, each in its own transaction, under an advisory lock so replicas
// starting together apply them once. It returns the versions applied.
func MigratePostgres(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	return schema.MigratePostgres(ctx, pool)
}

// MigrateSQLite applies the embedded SQLite migrations not applied yet.
func MigrateSQLite(ctx context.Context, db *sql.DB) ([]int, error) {
	return schema.MigrateSQLite(ctx, db)
}
