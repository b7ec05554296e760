-- The call detail records, in the layout Asterisk's cdr_pgsql writes
-- (plus id, and recordingfile as FreePBX adds it), so ctibridge can read
-- the PBX's own CDR table as well as write its own.
--
-- Indexes (what the queries need):
--   cdr_uniqueid_sequence  UNIQUE: the recorder's idempotency key; a
--                          reconnect or a second replica never duplicates
--   cdr_calldate           switchboard window scans (calldate range)
--   cdr_src_calldate       personal history: legs an extension placed
--   cdr_dst_calldate       personal history: legs to an extension
--   cdr_linkedid           fetching every leg of the calls on a page
CREATE TABLE IF NOT EXISTS cdr (
	id            bigserial,
	calldate      timestamptz NOT NULL,
	clid          text NOT NULL DEFAULT '',
	src           text NOT NULL DEFAULT '',
	dst           text NOT NULL DEFAULT '',
	dcontext      text NOT NULL DEFAULT '',
	channel       text NOT NULL DEFAULT '',
	dstchannel    text NOT NULL DEFAULT '',
	lastapp       text NOT NULL DEFAULT '',
	lastdata      text NOT NULL DEFAULT '',
	duration      integer NOT NULL DEFAULT 0,
	billsec       integer NOT NULL DEFAULT 0,
	disposition   text NOT NULL DEFAULT '',
	amaflags      text NOT NULL DEFAULT '',
	accountcode   text NOT NULL DEFAULT '',
	uniqueid      text NOT NULL DEFAULT '',
	linkedid      text NOT NULL DEFAULT '',
	userfield     text NOT NULL DEFAULT '',
	sequence      integer NOT NULL DEFAULT 0,
	peeraccount   text NOT NULL DEFAULT '',
	recordingfile text NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS cdr_uniqueid_sequence ON cdr (uniqueid, sequence);
CREATE INDEX IF NOT EXISTS cdr_calldate ON cdr (calldate);
CREATE INDEX IF NOT EXISTS cdr_src_calldate ON cdr (src, calldate);
CREATE INDEX IF NOT EXISTS cdr_dst_calldate ON cdr (dst, calldate);
CREATE INDEX IF NOT EXISTS cdr_linkedid ON cdr (linkedid);
