// Package phonebook stores contacts and answers "who is this number".
//
// A Store keeps contacts (NethCTI's shape: owner, type private, public or
// speeddial, name, company, numbers, emails, notes). It has two
// implementations sharing one set of queries and one conformance suite:
// NewPostgres over a pgxpool.Pool (production, and what replicas share)
// and NewSQLite over an embedded SQLite file (database/sql with the pure
// Go modernc.org/sqlite driver), the zero-setup default.
// Schema.MigratePostgres and Schema.MigrateSQLite apply the embedded,
// versioned schema; both constructors expect it applied. NewSQL takes any sqldb.Conn instead, such as a sqldb.Gate's, which
// answers sqldb.ErrUnavailable until the database is reachable and
// migrated (serve starts without its database).
// NewRemote forwards to a remote, NethCTI-compatible REST phonebook
// instead, through a Doer (*upstream.Client); Remote offers Book's methods.
//
// Numbers are also stored normalised (Normalizer: country code, trunk and
// international prefixes configurable), so "+39 0721 405516",
// "0039721405516" and "0721405516" find the same contact. Search terms are
// literals: %, _ and quotes match themselves; all SQL is parameterised.
//
// Book puts the ownership rules (a user edits only their own private and
// speed-dial contacts; admins edit public ones) and an in-memory reverse
// lookup Index on top of a Store. The index is rebuilt after every change
// made through the Book and, for changes made elsewhere (another replica),
// by Book.Run when the store's stamp moves. Index.Lookup never blocks and
// does not allocate: it is what calls.Config.NameLookup should be.
// Book.Search answers from the same in-memory copy of the public contacts
// (trigram postings, the SQL path's order and matching) and takes only
// the user's own contacts from the store; Store.Search is the SQL path.
//
// The package knows nothing of calls, HTTP handlers or users beyond a
// user name and an admin flag. Stores, Book and Index are safe for
// concurrent use.
package phonebook
