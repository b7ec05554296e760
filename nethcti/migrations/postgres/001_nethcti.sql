-- The NethCTI front's per-user data: settings (NethCTI's user settings,
-- default_extension among them) as JSON text, and persistent tokens
-- (phone-island's, the mobile app's, NethLink's) as SHA-256 hashes in
-- hex, never a token. Times are Unix nanoseconds.
CREATE TABLE nethcti_settings (
	username text NOT NULL,
	name     text NOT NULL,
	value    text NOT NULL,
	PRIMARY KEY (username, name)
);
CREATE TABLE nethcti_tokens (
	username   text NOT NULL,
	audience   text NOT NULL,
	hash       text NOT NULL UNIQUE,
	created_ns bigint NOT NULL,
	PRIMARY KEY (username, audience)
);
