-- The NethCTI front's per-user data: settings (NethCTI's user settings,
-- default_extension among them) as JSON text, and persistent tokens
-- (phone-island's, the mobile app's, NethLink's) as SHA-256 hashes in
-- hex, never a token. Times are Unix nanoseconds.
CREATE TABLE nethcti_settings (
	username TEXT NOT NULL,
	name     TEXT NOT NULL,
	value    TEXT NOT NULL,
	PRIMARY KEY (username, name)
);
CREATE TABLE nethcti_tokens (
	username   TEXT NOT NULL,
	audience   TEXT NOT NULL,
	hash       TEXT NOT NULL UNIQUE,
	created_ns INTEGER NOT NULL,
	PRIMARY KEY (username, audience)
);
