// Package sqldb lets the stores (phonebook, history) write each query once
// for both of their databases: PostgreSQL through a pgxpool.Pool (statements
// cached per connection) and SQLite through database/sql. Both take $1
// placeholders. It also applies embedded, versioned migrations, and
// opens either database from a DSN, "postgres://..." or "sqlite:PATH",
// with the pool and pragmas the stores are tuned for (Open: open.go).
//
// Errors that mean the database is out of reach (connection refused or
// lost, server shutting down or starting, class 08 errors) match
// ErrUnavailable, whichever query returned them, so callers can tell an
// outage (503, keep the data, try again) from a bad query; IsBadData
// tells a statement refused for its values. A Gate lets a process start
// without its database: its Conn answers ErrUnavailable until Gate.Run
// has connected and migrated, retrying with backoff, and at once while
// the database is known to be down; Run keeps checking the database
// (Gate.Up). Outage logs a run of failures once, then a count a minute,
// then the recovery.
//
// A Conn is safe for concurrent use, as the pool or *sql.DB under it is;
// the Conn given to an InTx callback belongs to that callback. Gate and
// Outage are safe for concurrent use; a Backoff belongs to one goroutine.
package sqldb
