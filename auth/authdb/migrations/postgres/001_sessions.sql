-- Login sessions (auth.SessionRecord): SHA-256 hashes of the tokens in
-- hex, never a token. Times are Unix nanoseconds; 0 means none.
CREATE TABLE auth_sessions (
	id                 text PRIMARY KEY,
	username           text NOT NULL,
	access_hash        text NOT NULL UNIQUE,
	refresh_hash       text NOT NULL DEFAULT '',
	created_ns         bigint NOT NULL,
	expires_ns         bigint NOT NULL,
	refresh_expires_ns bigint NOT NULL DEFAULT 0,
	client_addr        text NOT NULL DEFAULT ''
);
CREATE INDEX auth_sessions_username ON auth_sessions (username);
