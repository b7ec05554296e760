// Package authdb stores login sessions (auth.SessionRecord) in the
// bridge's database, the embedded SQLite or PostgreSQL, through sqldb: one
// table, auth_sessions, holding SHA-256 hashes of the tokens (never a
// token), so sessions survive a restart of serve and replicas sharing one
// PostgreSQL see the same rows. It satisfies auth.SessionStore; wrap it in
// auth.Fallback with an auth.FileSessions so a database that is down
// loses neither new sessions nor revocations.
//
// On PostgreSQL it is also auth.SharedSessions (shared.go), the table of
// every node of a deployment: lookups by token hash, refresh tokens spent
// by one conditional UPDATE, and WatchSessions, which LISTENs on
// ctibridge_sessions, fed by a trigger on the table (migration 002:
// "<schema> +|- <id>" per row written or deleted; other schemas' changes
// are ignored), on a connection of its own checked after every second of
// silence.
//
// It does not cache: auth.Service keeps the sessions in memory and calls
// the store only on login, refresh, revocation, sweep, start, and (shared)
// for a token or change of another node.
//
// Concurrency: a Store is safe for concurrent use.
package authdb
