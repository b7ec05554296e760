// Package authdb stores login sessions (auth.SessionRecord) in the
// bridge's database, the embedded SQLite or PostgreSQL, through sqldb: one
// table, auth_sessions, holding SHA-256 hashes of the tokens (never a
// token), so sessions survive a restart of serve and replicas sharing one
// PostgreSQL see the same rows. It satisfies auth.SessionStore; wrap it in
// auth.Fallback with an auth.FileSessions so a database that is down
// loses neither new sessions nor revocations.
//
// It does not cache: auth.Service keeps the sessions in memory and calls
// the store only on login, refresh, revocation, sweep and start.
//
// Concurrency: a Store is safe for concurrent use.
package authdb
