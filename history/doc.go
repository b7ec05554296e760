// Package history stores call detail records and answers call-history
// questions: a user's calls (by their extensions) or the whole
// switchboard's, always within a bounded time window, filtered by
// direction and text, one entry per call (legs grouped by linkedid) and
// paginated by keyset cursor, so a page never repeats or skips calls
// while new ones are recorded.
//
// The table is Asterisk's cdr layout as cdr_pgsql writes it, so a Store
// can read the PBX's own CDR database. Store has two implementations
// sharing one set of queries and one conformance suite: NewPostgres over
// a pgxpool.Pool and NewSQLite over an embedded SQLite file (pure Go
// modernc.org/sqlite), the zero-setup default. Schema.MigratePostgres
// and Schema.MigrateSQLite apply the embedded, versioned schema; NewSQL takes any
// sqldb.Conn, such as a sqldb.Gate's, which answers sqldb.ErrUnavailable
// until the database is reachable and migrated. NewRemote reads
// a NethCTI-compatible REST history service instead, through a Doer
// (*upstream.Client).
//
// A Recorder writes CDRs itself from the AMI Cdr events (cdr_manager):
// Observe takes every AMI message without blocking; Run appends the CDRs
// to a spool (package wal) in the data directory with one fsync per group (group
// commit), which is when a CDR counts as taken, and writes the spool to
// the database in order and in batches, idempotent on (uniqueid,
// sequence), so a replay after a crash, reconnects and replicas never
// duplicate a row. While the database is down (or not yet migrated) the
// spool, bounded, keeps the CDRs; it is drained when the database comes
// back, or by the next process.
//
// Names shown for numbers come from a lookup function (the phonebook's
// index); the package knows nothing of HTTP or users. Stores and the
// Recorder are safe for concurrent use.
package history
