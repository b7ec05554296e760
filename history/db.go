package history

// The queries run on PostgreSQL and SQLite alike through sqldb.

import (
	"embed"

	"github.com/ctibridge/ctibridge/sqldb"
)

type conn = sqldb.Conn

//go:embed migrations
var migrations embed.FS

// Schema is the package's embedded, versioned schema:
// Schema.MigratePostgres and Schema.MigrateSQLite apply the migrations not
// applied yet and return their versions. Its rows in the shared migrations
// table are named "history"; its lock number serialises concurrent starts on
// PostgreSQL.
var Schema = sqldb.Schema{FS: migrations, Component: "history", Lock: 7242002}
