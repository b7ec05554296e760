package phonebook

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/sqldb"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store keeps contacts. Visibility (a viewer sees public contacts and
// their own) is applied by Search and Lookup; ownership rules for changes
// are Book's. Implementations are safe for concurrent use.
type Store interface {
	// Search returns one page of the contacts visible to q.Viewer that
	// match q.Term, ordered by name then id.
	Search(ctx context.Context, q Query) (Page, error)
	// Lookup returns the contacts visible to viewer with a number whose
	// normal form is that of number (at most MaxLimit).
	Lookup(ctx context.Context, viewer, number string) ([]Contact, error)
	// Get returns a contact by id, or ErrNotFound.
	Get(ctx context.Context, id int64) (Contact, error)
	// Create stores c (its ID is ignored) and returns it with its ID.
	Create(ctx context.Context, c Contact) (Contact, error)
	// CreateMany stores all of cs in one transaction, or none.
	CreateMany(ctx context.Context, cs []Contact) error
	// Update replaces the contact with c.ID, or returns ErrNotFound.
	Update(ctx context.Context, c Contact) error
	// Delete removes a contact, or returns ErrNotFound.
	Delete(ctx context.Context, id int64) error
	// Public calls fn for every public contact (to build the Index).
	Public(ctx context.Context, fn func(Contact) error) error
	// Stamp changes whenever a contact is created, changed or deleted,
	// by anyone sharing the database.
	Stamp(ctx context.Context) (string, error)
}

// SQLStore is the Store over PostgreSQL or SQLite.
type SQLStore struct {
	c    conn
	norm Normalizer
	now  func() time.Time
}

// NewPostgres returns a Store over pool; Schema.MigratePostgres must have run.
// n normalises numbers when they are stored and searched.
func NewPostgres(pool *pgxpool.Pool, n Normalizer) *SQLStore {
	return &SQLStore{c: sqldb.Pgx(pool), norm: n, now: time.Now}
}

// NewSQLite returns a Store over db (modernc.org/sqlite; open it with
// busy_timeout, WAL and _txlock=immediate); Schema.MigrateSQLite must have run.
func NewSQLite(db *sql.DB, n Normalizer) *SQLStore {
	return &SQLStore{c: sqldb.SQL(db), norm: n, now: time.Now}
}

// NewSQL returns a Store over c (such as a sqldb.Gate's Conn, which
// answers sqldb.ErrUnavailable until the database is migrated).
func NewSQL(c sqldb.Conn, n Normalizer) *SQLStore {
	return &SQLStore{c: c, norm: n, now: time.Now}
}

const columns = `id, owner_id, type, name, company, workphone, homephone, cellphone, fax,
	workemail, homeemail, notes, speeddial_num, source`

func scanContact(scan func(dest ...any) error, extra ...any) (Contact, error) {
	var c Contact
	dest := append([]any{&c.ID, &c.OwnerID, &c.Type, &c.Name, &c.Company, &c.WorkPhone, &c.HomePhone,
		&c.CellPhone, &c.Fax, &c.WorkEmail, &c.HomeEmail, &c.Notes, &c.SpeeddialNum, &c.Source}, extra...)
	err := scan(dest...)
	if errors.Is(err, sqldb.ErrNoRows) {
		err = ErrNotFound
	}
	return c, err
}

// likeEscape makes s a literal inside a LIKE pattern with ESCAPE '\'.
func likeEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s)
}

// searchText is the lower-cased text that name/company searches match.
func searchText(c *Contact) string {
	return strings.ToLower(c.Name + " \x1f " + c.Company)
}

// numbersText is " n1 n2 ... " with every normalised number.
func (s *SQLStore) numbersText(c *Contact) string {
	var b strings.Builder
	b.WriteByte(' ')
	for _, n := range c.Numbers() {
		if v := s.norm.Normalize(n); v != "" {
			b.WriteString(v)
			b.WriteByte(' ')
		}
	}
	return b.String()
}

func clampQuery(q *Query) error {
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	if q.Limit < 0 || q.Limit > MaxLimit {
		return &InvalidError{"limit", fmt.Sprintf("must be 1..%d", MaxLimit)}
	}
	if q.Offset < 0 {
		return &InvalidError{"offset", "must not be negative"}
	}
	if len(q.Term) > MaxField {
		return &InvalidError{"term", fmt.Sprintf("longer than %d bytes", MaxField)}
	}
	return nil
}

// searchWhere is the filter of a search by viewer for term (trimmed):
// what the viewer sees, or with own only their non-public contacts.
func (s *SQLStore) searchWhere(viewer, term string, own bool) (string, []any) {
	args := []any{viewer}
	where := `(type = 'public' OR owner_id = $1)`
	if own {
		where = `type <> 'public' AND owner_id = $1`
	}
	if term != "" {
		args = append(args, "%"+likeEscape(strings.ToLower(term))+"%")
		cond := `search LIKE $2 ESCAPE '\'`
		if looksLikeNumber(term) {
			if n := s.norm.Normalize(term); n != "" {
				args = append(args, "%"+likeEscape(n)+"%")
				cond += ` OR numbers LIKE $3 ESCAPE '\'`
			}
		}
		where += ` AND (` + cond + `)`
	}
	return where, args
}

// orderBy is the search order: name then id, bytewise on both drivers
// (SQLite's BINARY; "C" on PostgreSQL whatever the database collation),
// which is also Go's string order, so the in-memory search agrees.
func (s *SQLStore) orderBy() string {
	if s.c.Postgres() {
		return ` ORDER BY name COLLATE "C", id`
	}
	return ` ORDER BY name, id`
}

// Search implements Store.
func (s *SQLStore) Search(ctx context.Context, q Query) (Page, error) {
	if err := clampQuery(&q); err != nil {
		return Page{}, err
	}
	where, args := s.searchWhere(q.Viewer, strings.TrimSpace(q.Term), false)
	p, err := s.page(ctx, where, args, q.Limit, q.Offset)
	if err != nil {
		return Page{}, fmt.Errorf("phonebook: search: %w", err)
	}
	return p, nil
}

// searchOwn implements ownSearcher for Book's in-memory search.
func (s *SQLStore) searchOwn(ctx context.Context, viewer, term string, n int) ([]Contact, int, error) {
	where, args := s.searchWhere(viewer, term, true)
	p, err := s.page(ctx, where, args, n, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("phonebook: search: %w", err)
	}
	return p.Rows, p.Count, nil
}

// listOwn implements ownSearcher.
func (s *SQLStore) listOwn(ctx context.Context, viewer string, max int) ([]Contact, error) {
	where, args := s.searchWhere(viewer, "", true)
	p, err := s.page(ctx, where, args, max, 0)
	if err != nil {
		return nil, fmt.Errorf("phonebook: search: %w", err)
	}
	return p.Rows, nil
}

// page selects one page of the contacts matching where, and their count.
func (s *SQLStore) page(ctx context.Context, where string, args []any, limit, offset int) (Page, error) {
	page := fmt.Sprintf(` LIMIT $%d OFFSET $%d`, len(args)+1, len(args)+2)
	rs, done, err := s.c.Query(ctx, `SELECT `+columns+`, count(*) OVER () FROM phonebook_contacts
		WHERE `+where+s.orderBy()+page, append(args, limit, offset)...)
	if err != nil {
		return Page{}, err
	}
	defer done()
	p := Page{Rows: []Contact{}}
	for rs.Next() {
		c, err := scanContact(rs.Scan, &p.Count)
		if err != nil {
			return Page{}, err
		}
		p.Rows = append(p.Rows, c)
	}
	if err := rs.Err(); err != nil {
		return Page{}, err
	}
	done()
	if len(p.Rows) == 0 && offset > 0 {
		// Past the end: the window count went with the rows.
		if err := s.c.QueryRow(ctx, `SELECT count(*) FROM phonebook_contacts WHERE `+where, args...)(&p.Count); err != nil {
			return Page{}, fmt.Errorf("count: %w", err)
		}
	}
	return p, nil
}

// Lookup implements Store.
func (s *SQLStore) Lookup(ctx context.Context, viewer, number string) ([]Contact, error) {
	n := s.norm.Normalize(number)
	if n == "" {
		return []Contact{}, nil
	}
	rs, done, err := s.c.Query(ctx, `SELECT `+columns+` FROM phonebook_contacts
		WHERE (type = 'public' OR owner_id = $1) AND numbers LIKE $2 ESCAPE '\'
		ORDER BY type = 'public', name, id LIMIT `+strconv.Itoa(MaxLimit), viewer, "% "+likeEscape(n)+" %")
	if err != nil {
		return nil, fmt.Errorf("phonebook: lookup: %w", err)
	}
	defer done()
	out := []Contact{}
	for rs.Next() {
		c, err := scanContact(rs.Scan)
		if err != nil {
			return nil, fmt.Errorf("phonebook: lookup: %w", err)
		}
		out = append(out, c)
	}
	return out, rs.Err()
}

// Get implements Store.
func (s *SQLStore) Get(ctx context.Context, id int64) (Contact, error) {
	c, err := scanContact(s.c.QueryRow(ctx, `SELECT `+columns+` FROM phonebook_contacts WHERE id = $1`, id))
	if err != nil && err != ErrNotFound {
		err = fmt.Errorf("phonebook: get: %w", err)
	}
	return c, err
}

func (s *SQLStore) values(c *Contact) []any {
	if c.Source == "" {
		c.Source = "cti"
	}
	return []any{c.OwnerID, c.Type, c.Name, c.Company, c.WorkPhone, c.HomePhone, c.CellPhone, c.Fax,
		c.WorkEmail, c.HomeEmail, c.Notes, c.SpeeddialNum, c.Source, searchText(c), s.numbersText(c), s.now().UnixMilli()}
}

const insert = `INSERT INTO phonebook_contacts (owner_id, type, name, company, workphone, homephone,
	cellphone, fax, workemail, homeemail, notes, speeddial_num, source, search, numbers, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) RETURNING id`

// Create implements Store.
func (s *SQLStore) Create(ctx context.Context, c Contact) (Contact, error) {
	if err := c.Validate(); err != nil {
		return Contact{}, err
	}
	if err := s.c.QueryRow(ctx, insert, s.values(&c)...)(&c.ID); err != nil {
		return Contact{}, fmt.Errorf("phonebook: create: %w", err)
	}
	return c, nil
}

// CreateMany implements Store.
func (s *SQLStore) CreateMany(ctx context.Context, cs []Contact) error {
	for i := range cs {
		if err := cs[i].Validate(); err != nil {
			return err
		}
	}
	err := s.c.InTx(ctx, func(tx conn) error {
		for i := range cs {
			if err := tx.QueryRow(ctx, insert, s.values(&cs[i])...)(&cs[i].ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("phonebook: create: %w", err)
	}
	return nil
}

// Update implements Store.
func (s *SQLStore) Update(ctx context.Context, c Contact) error {
	if err := c.Validate(); err != nil {
		return err
	}
	n, err := s.c.Exec(ctx, `UPDATE phonebook_contacts SET owner_id = $1, type = $2, name = $3, company = $4,
		workphone = $5, homephone = $6, cellphone = $7, fax = $8, workemail = $9, homeemail = $10,
		notes = $11, speeddial_num = $12, source = $13, search = $14, numbers = $15, updated_at = $16
		WHERE id = $17`, append(s.values(&c), c.ID)...)
	if err != nil {
		return fmt.Errorf("phonebook: update: %w", err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// Delete implements Store.
func (s *SQLStore) Delete(ctx context.Context, id int64) error {
	n, err := s.c.Exec(ctx, `DELETE FROM phonebook_contacts WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("phonebook: delete: %w", err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// Public implements Store.
func (s *SQLStore) Public(ctx context.Context, fn func(Contact) error) error {
	rs, done, err := s.c.Query(ctx, `SELECT `+columns+` FROM phonebook_contacts WHERE type = 'public' ORDER BY id`)
	if err != nil {
		return fmt.Errorf("phonebook: list: %w", err)
	}
	defer done()
	for rs.Next() {
		c, err := scanContact(rs.Scan)
		if err != nil {
			return fmt.Errorf("phonebook: list: %w", err)
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	return rs.Err()
}

// Stamp implements Store: the row count, the largest id and the latest
// change time. A delete changes the count; an update the time.
func (s *SQLStore) Stamp(ctx context.Context) (string, error) {
	var n, maxID, at int64
	err := s.c.QueryRow(ctx, `SELECT count(*), coalesce(max(id), 0), coalesce(max(updated_at), 0) FROM phonebook_contacts`)(&n, &maxID, &at)
	if err != nil {
		return "", fmt.Errorf("phonebook: stamp: %w", err)
	}
	return fmt.Sprintf("%d/%d/%d", n, maxID, at), nil
}
