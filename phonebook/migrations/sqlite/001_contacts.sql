-- Contacts; see migrations/postgres/001_contacts.sql for the columns.
-- SQLite has no trigram index: substring searches scan the table, which is
-- fine for the embedded default's size (tens of thousands of contacts).
CREATE TABLE phonebook_contacts (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	owner_id      TEXT NOT NULL DEFAULT '',
	type          TEXT NOT NULL CHECK (type IN ('private', 'public', 'speeddial')),
	name          TEXT NOT NULL DEFAULT '',
	company       TEXT NOT NULL DEFAULT '',
	workphone     TEXT NOT NULL DEFAULT '',
	homephone     TEXT NOT NULL DEFAULT '',
	cellphone     TEXT NOT NULL DEFAULT '',
	fax           TEXT NOT NULL DEFAULT '',
	workemail     TEXT NOT NULL DEFAULT '',
	homeemail     TEXT NOT NULL DEFAULT '',
	notes         TEXT NOT NULL DEFAULT '',
	speeddial_num TEXT NOT NULL DEFAULT '',
	source        TEXT NOT NULL DEFAULT 'cti',
	search        TEXT NOT NULL DEFAULT '',
	numbers       TEXT NOT NULL DEFAULT '',
	updated_at    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX phonebook_contacts_owner ON phonebook_contacts (owner_id);
