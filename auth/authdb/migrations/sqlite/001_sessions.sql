-- Login sessions (auth.SessionRecord): SHA-256 hashes of the tokens in
-- hex, never a token. Times are Unix nanoseconds; 0 means none.
CREATE TABLE auth_sessions (
	id                 TEXT PRIMARY KEY,
	username           TEXT NOT NULL,
	access_hash        TEXT NOT NULL UNIQUE,
	refresh_hash       TEXT NOT NULL DEFAULT '',
	created_ns         INTEGER NOT NULL,
	expires_ns         INTEGER NOT NULL,
	refresh_expires_ns INTEGER NOT NULL DEFAULT 0,
	client_addr        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX auth_sessions_username ON auth_sessions (username);
