package history

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

// component names this package's rows in the shared migrations table.
const component = "history"

// migrationLock serialises concurrent starts on PostgreSQL.
const migrationLock = 7242002

// MigratePostgres applies the embedded PostgreSQL migrations not applied
// yet, each in its own transaction, under an advisory lock so replicas
// starting together apply them once. It returns the versions applied.
func MigratePostgres(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	return sqldb.Migrate(ctx, sqldb.Pgx(pool), migrations, "migrations/postgres", component, migrationLock)
}

// MigrateSQLite applies the embedded SQLite migrations not applied yet.
func MigrateSQLite(ctx context.Context, db *sql.DB) ([]int, error) {
	return sqldb.Migrate(ctx, sqldb.SQL(db), migrations, "migrations/sqlite", component, migrationLock)
}
