-- See migrations/postgres/001_cdr.sql; calldate is Unix seconds (UTC).
CREATE TABLE IF NOT EXISTS cdr (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	calldate      INTEGER NOT NULL,
	clid          TEXT NOT NULL DEFAULT '',
	src           TEXT NOT NULL DEFAULT '',
	dst           TEXT NOT NULL DEFAULT '',
	dcontext      TEXT NOT NULL DEFAULT '',
	channel       TEXT NOT NULL DEFAULT '',
	dstchannel    TEXT NOT NULL DEFAULT '',
	lastapp       TEXT NOT NULL DEFAULT '',
	lastdata      TEXT NOT NULL DEFAULT '',
	duration      INTEGER NOT NULL DEFAULT 0,
	billsec       INTEGER NOT NULL DEFAULT 0,
	disposition   TEXT NOT NULL DEFAULT '',
	amaflags      TEXT NOT NULL DEFAULT '',
	accountcode   TEXT NOT NULL DEFAULT '',
	uniqueid      TEXT NOT NULL DEFAULT '',
	linkedid      TEXT NOT NULL DEFAULT '',
	userfield     TEXT NOT NULL DEFAULT '',
	sequence      INTEGER NOT NULL DEFAULT 0,
	peeraccount   TEXT NOT NULL DEFAULT '',
	recordingfile TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS cdr_uniqueid_sequence ON cdr (uniqueid, sequence);
CREATE INDEX IF NOT EXISTS cdr_calldate ON cdr (calldate);
CREATE INDEX IF NOT EXISTS cdr_src_calldate ON cdr (src, calldate);
CREATE INDEX IF NOT EXISTS cdr_dst_calldate ON cdr (dst, calldate);
CREATE INDEX IF NOT EXISTS cdr_linkedid ON cdr (linkedid);
