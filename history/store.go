package history

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/sqldb"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Directions of a call, from the lengths of its numbers: internal when
// both are extensions (at most Config.ExtenMaxLen digits, or a named
// PBX's extension, which its recorder writes "site2:201": docs/operations.md
// "Several PBXs"), out when only the caller is, in otherwise.
const (
	DirIn       = "in"
	DirOut      = "out"
	DirInternal = "internal"
)

// Limits of Query.
const (
	DefaultLimit = 50
	MaxLimit     = 500
	MaxText      = 64
)

var errNoRows = sqldb.ErrNoRows

// InvalidError is a refused query (a 400): no or bad window, bad
// direction, cursor or limit.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return "history: " + e.Msg }

// IsInvalid reports whether err is bad input.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

// Query selects calls. From and To are required (To after From, at most
// Config.MaxWindow apart). Extensions nil means the whole switchboard;
// empty (not nil) matches nothing.
type Query struct {
	From, To   time.Time
	Extensions []string
	// User is whose calls these are (the user owning Extensions), ""
	// for the switchboard, and Viewer who asks; SQLStore ignores both,
	// Remote forwards them (the path's user and the identity header).
	User, Viewer string
	Direction    string // "", DirIn, DirOut or DirInternal
	// PBXs, when not nil, keeps the calls of those PBXs only, when
	// several are followed (docs/operations.md "Several PBXs"): "" the
	// default PBX's (a uniqueid without a colon), a name the named PBX's
	// (its recorder writes uniqueid "name:..."). Empty matches nothing.
	// Remote refuses it (ErrPBXFilter).
	PBXs   []string
	Text   string // substring of the caller id, source or destination
	Limit  int    // calls per page, default DefaultLimit
	Cursor string // Page.Next of the previous page, "" for the first
}

// Leg is one CDR of a call.
type Leg struct {
	UniqueID    string `json:"uniqueid"`
	Channel     string `json:"channel"`
	DstChannel  string `json:"dstchannel"`
	Src         string `json:"src"`
	Dst         string `json:"dst"`
	LastApp     string `json:"lastapp"`
	Disposition string `json:"disposition"`
	Duration    int    `json:"duration"`
	Billsec     int    `json:"billsec"`
	Time        int64  `json:"time"`
}

// Call is one call: its legs grouped by linkedid.
type Call struct {
	LinkedID      string `json:"linkedid"`
	Time          int64  `json:"time"` // Unix seconds of the first leg
	Src           string `json:"src"`
	CNAM          string `json:"cnam"`
	Dst           string `json:"dst"`
	DstCNAM       string `json:"dst_cnam"`
	Direction     string `json:"direction"`
	Disposition   string `json:"disposition"` // ANSWERED if any leg was
	Duration      int    `json:"duration"`    // first leg start to last leg end
	Billsec       int    `json:"billsec"`     // the answered leg's talk time
	Queue         string `json:"queue"`
	RecordingFile string `json:"recordingfile"`
	Legs          []Leg  `json:"legs"`
}

// Page is one page of calls; Next is the cursor of the next page, nil at
// the end. Count is the number of calls on this page.
type Page struct {
	Count int     `json:"count"`
	Next  *string `json:"next"`
	Rows  []Call  `json:"rows"`
}

// Store reads and writes CDRs.
type Store interface {
	// Calls returns one page of calls, newest first.
	Calls(ctx context.Context, q Query) (Page, error)
	// Export calls fn for every leg matching q (Limit and Cursor are
	// ignored), newest first, streaming from the database.
	Export(ctx context.Context, q Query, fn func(CDR) error) error
	// Insert writes CDRs, skipping any whose (uniqueid, sequence) is
	// already stored, in one transaction.
	Insert(ctx context.Context, cdrs []CDR) error
}

// Config configures a store. The zero value is usable.
type Config struct {
	// MaxWindow is the longest From..To accepted. Default 92 days.
	MaxWindow time.Duration
	// ExtenMaxLen: numbers of at most this many characters are
	// extensions (for Direction). Default 5.
	ExtenMaxLen int
	// NameLookup names numbers (cnam when the caller id has none,
	// dst_cnam); the phonebook index. Optional; must not block.
	NameLookup func(number string) string
}

// SQLStore is the Store over PostgreSQL or SQLite.
type SQLStore struct {
	c   conn
	cfg Config
}

// NewPostgres returns a Store over pool; Schema.MigratePostgres must have run
// (or the pool's search_path names the PBX's cdr table, read only).
func NewPostgres(pool *pgxpool.Pool, cfg Config) *SQLStore {
	return &SQLStore{c: sqldb.Pgx(pool), cfg: defaults(cfg)}
}

// NewSQLite returns a Store over db; Schema.MigrateSQLite must have run.
func NewSQLite(db *sql.DB, cfg Config) *SQLStore {
	return &SQLStore{c: sqldb.SQL(db), cfg: defaults(cfg)}
}

// NewSQL returns a Store over c (such as a sqldb.Gate's Conn, which
// answers sqldb.ErrUnavailable until the database is migrated).
func NewSQL(c sqldb.Conn, cfg Config) *SQLStore {
	return &SQLStore{c: c, cfg: defaults(cfg)}
}

func defaults(cfg Config) Config {
	if cfg.MaxWindow <= 0 {
		cfg.MaxWindow = 92 * 24 * time.Hour
	}
	if cfg.ExtenMaxLen <= 0 {
		cfg.ExtenMaxLen = 5
	}
	return cfg
}

// ts is a time as the dialect stores calldate.
func (s *SQLStore) ts(t time.Time) any {
	if s.c.Postgres() {
		return t
	}
	return t.Unix()
}

// micros is the SQL expression for a calldate (or aggregate of it) in
// Unix microseconds.
func (s *SQLStore) micros(expr string) string {
	if s.c.Postgres() {
		return "(extract(epoch FROM " + expr + ") * 1000000)::bigint"
	}
	return "(" + expr + " * 1000000)"
}

// args collects query parameters and hands out their placeholders.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

func (a *args) in(vs []string) string {
	ph := make([]string, len(vs))
	for i, v := range vs {
		ph[i] = a.add(v)
	}
	return "(" + strings.Join(ph, ", ") + ")"
}

func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// where builds the filter of q's legs.
func (s *SQLStore) where(q *Query, a *args) (string, error) {
	if q.From.IsZero() || q.To.IsZero() || !q.To.After(q.From) {
		return "", &InvalidError{"a time window with to after from is required"}
	}
	if q.To.Sub(q.From) > s.cfg.MaxWindow {
		return "", &InvalidError{fmt.Sprintf("the window is longer than %d days", int(s.cfg.MaxWindow.Hours()/24))}
	}
	if len(q.Text) > MaxText {
		return "", &InvalidError{fmt.Sprintf("text longer than %d bytes", MaxText)}
	}
	w := []string{"calldate >= " + a.add(s.ts(q.From)), "calldate < " + a.add(s.ts(q.To))}
	if q.Extensions != nil {
		if len(q.Extensions) == 0 {
			w = append(w, "1 = 0")
		} else {
			w = append(w, "(src IN "+a.in(q.Extensions)+" OR dst IN "+a.in(q.Extensions)+")")
		}
	}
	var n string
	switch q.Direction {
	case "", DirInternal, DirOut, DirIn:
		if q.Direction != "" {
			n = a.add(s.cfg.ExtenMaxLen)
		}
	default:
		return "", &InvalidError{fmt.Sprintf("direction %q is not in, out or internal", q.Direction)}
	}
	// A number with a colon is a named PBX's extension (isExten).
	srcExt, dstExt := "(length(src) <= "+n+" OR src LIKE '%:%')", "(length(dst) <= "+n+" OR dst LIKE '%:%')"
	switch q.Direction {
	case DirInternal:
		w = append(w, srcExt+" AND "+dstExt)
	case DirOut:
		w = append(w, srcExt+" AND NOT "+dstExt)
	case DirIn:
		w = append(w, "NOT "+srcExt)
	}
	if q.PBXs != nil {
		var or []string
		for _, p := range q.PBXs {
			if p == "" {
				or = append(or, "uniqueid NOT LIKE '%:%'")
			} else {
				or = append(or, "uniqueid LIKE "+a.add(likeEscape(p)+":%")+` ESCAPE '\'`)
			}
		}
		if or == nil {
			or = []string{"1 = 0"}
		}
		w = append(w, "("+strings.Join(or, " OR ")+")")
	}
	if t := strings.TrimSpace(q.Text); t != "" {
		p := a.add("%" + likeEscape(strings.ToLower(t)) + "%")
		w = append(w, "(lower(clid) LIKE "+p+` ESCAPE '\' OR src LIKE `+p+` ESCAPE '\' OR dst LIKE `+p+` ESCAPE '\')`)
	}
	return strings.Join(w, " AND "), nil
}

// Cursors are "<micros>:<group key>" in unpadded base64url.
func encodeCursor(us int64, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(us, 10) + ":" + key))
}

func decodeCursor(c string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if t, k, ok := strings.Cut(string(b), ":"); ok {
			if us, err := strconv.ParseInt(t, 10, 64); err == nil {
				return us, k, nil
			}
		}
	}
	return 0, "", &InvalidError{"bad cursor"}
}

// groupKey is a leg's call: its linkedid, or its uniqueid when the PBX
// wrote none.
const groupKey = "coalesce(nullif(linkedid, ''), uniqueid)"

const legColumns = `calldate, clid, src, dst, dcontext, channel, dstchannel, lastapp, lastdata, duration,
	billsec, disposition, amaflags, accountcode, uniqueid, linkedid, userfield, sequence, peeraccount, recordingfile`

func (s *SQLStore) selectLegs() string {
	return s.micros("calldate") + ", " + strings.TrimPrefix(legColumns, "calldate, ")
}

func scanLeg(scan func(...any) error) (CDR, error) {
	var c CDR
	var us int64
	err := scan(&us, &c.CLID, &c.Src, &c.Dst, &c.DContext, &c.Channel, &c.DstChannel, &c.LastApp, &c.LastData,
		&c.Duration, &c.Billsec, &c.Disposition, &c.AMAFlags, &c.AccountCode, &c.UniqueID, &c.LinkedID,
		&c.UserField, &c.Sequence, &c.PeerAccount, &c.RecordingFile)
	c.CallDate = time.UnixMicro(us).UTC()
	return c, err
}

// Calls implements Store: it pages through the groups (calls) whose
// matching legs are in the window, ordered by their first matching leg,
// newest first, with the cursor (first leg time, key) of the last call
// shown; then it loads every leg of the calls on the page.
func (s *SQLStore) Calls(ctx context.Context, q Query) (Page, error) {
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	if q.Limit < 0 || q.Limit > MaxLimit {
		return Page{}, &InvalidError{fmt.Sprintf("limit must be 1..%d", MaxLimit)}
	}
	var a args
	where, err := s.where(&q, &a)
	if err != nil {
		return Page{}, err
	}
	first := s.micros("min(calldate)")
	having := ""
	if q.Cursor != "" {
		us, key, err := decodeCursor(q.Cursor)
		if err != nil {
			return Page{}, err
		}
		having = " HAVING (" + first + ", " + groupKey + ") < (" + a.add(us) + ", " + a.add(key) + ")"
	}
	rs, done, err := s.c.Query(ctx, `SELECT `+groupKey+`, `+first+` FROM cdr WHERE `+where+
		` GROUP BY `+groupKey+having+` ORDER BY 2 DESC, 1 DESC LIMIT `+a.add(q.Limit+1), a...)
	if err != nil {
		return Page{}, fmt.Errorf("history: calls: %w", err)
	}
	defer done()
	var keys []string
	var firsts []int64
	for rs.Next() {
		var k string
		var us int64
		if err := rs.Scan(&k, &us); err != nil {
			return Page{}, fmt.Errorf("history: calls: %w", err)
		}
		keys, firsts = append(keys, k), append(firsts, us)
	}
	if err := rs.Err(); err != nil {
		return Page{}, fmt.Errorf("history: calls: %w", err)
	}
	done()
	p := Page{Rows: []Call{}}
	if len(keys) > q.Limit {
		keys, firsts = keys[:q.Limit], firsts[:q.Limit]
		next := encodeCursor(firsts[q.Limit-1], keys[q.Limit-1])
		p.Next = &next
	}
	if len(keys) == 0 {
		return p, nil
	}
	legs, err := s.legs(ctx, keys)
	if err != nil {
		return Page{}, err
	}
	for _, k := range keys {
		p.Rows = append(p.Rows, s.call(k, legs[k]))
	}
	p.Count = len(p.Rows)
	return p, nil
}

// legs loads every leg of the given calls.
func (s *SQLStore) legs(ctx context.Context, keys []string) (map[string][]CDR, error) {
	var a args
	in := a.in(keys)
	rs, done, err := s.c.Query(ctx, `SELECT `+s.selectLegs()+` FROM cdr WHERE linkedid IN `+in+
		` OR (linkedid = '' AND uniqueid IN `+in+`) ORDER BY calldate, uniqueid, sequence`, a...)
	if err != nil {
		return nil, fmt.Errorf("history: legs: %w", err)
	}
	defer done()
	out := make(map[string][]CDR, len(keys))
	for rs.Next() {
		c, err := scanLeg(rs.Scan)
		if err != nil {
			return nil, fmt.Errorf("history: legs: %w", err)
		}
		k := c.LinkedID
		if k == "" {
			k = c.UniqueID
		}
		out[k] = append(out[k], c)
	}
	return out, rs.Err()
}

// Direction of a call from its numbers.
func (s *SQLStore) direction(src, dst string) string {
	switch {
	case s.isExten(src) && s.isExten(dst):
		return DirInternal
	case s.isExten(src):
		return DirOut
	}
	return DirIn
}

// isExten reports whether a CDR's number is an extension: at most
// ExtenMaxLen characters, or a named PBX's extension ("site2:201"; no
// dialled number has a colon).
func (s *SQLStore) isExten(num string) bool {
	return len(num) <= s.cfg.ExtenMaxLen || strings.IndexByte(num, ':') >= 0
}

func (s *SQLStore) name(num string) string {
	if s.cfg.NameLookup == nil || num == "" {
		return ""
	}
	return s.cfg.NameLookup(num)
}

// call summarises a call's legs (sorted by time).
func (s *SQLStore) call(key string, legs []CDR) Call {
	c := Call{LinkedID: key, Legs: make([]Leg, 0, len(legs))}
	if len(legs) == 0 {
		return c
	}
	f := legs[0]
	c.Time, c.Src, c.Dst = f.CallDate.Unix(), f.Src, f.Dst
	c.CNAM = callerName(f.CLID)
	if c.CNAM == "" || c.CNAM == c.Src {
		c.CNAM = s.name(c.Src)
	}
	c.DstCNAM = s.name(c.Dst)
	c.Direction = s.direction(c.Src, c.Dst)
	c.Disposition = f.Disposition
	var end int64
	for _, l := range legs {
		c.Legs = append(c.Legs, Leg{UniqueID: l.UniqueID, Channel: l.Channel, DstChannel: l.DstChannel, Src: l.Src, Dst: l.Dst,
			LastApp: l.LastApp, Disposition: l.Disposition, Duration: l.Duration, Billsec: l.Billsec, Time: l.CallDate.Unix()})
		end = max(end, l.CallDate.Unix()+int64(l.Duration))
		if l.Disposition == "ANSWERED" {
			c.Disposition = "ANSWERED"
			c.Billsec = max(c.Billsec, l.Billsec)
		}
		if l.LastApp == "Queue" && c.Queue == "" {
			c.Queue = queueOfCDR(l)
		}
		if c.RecordingFile == "" {
			c.RecordingFile = l.RecordingFile
		}
	}
	c.Duration = int(end - c.Time)
	return c
}

// Export implements Store.
func (s *SQLStore) Export(ctx context.Context, q Query, fn func(CDR) error) error {
	var a args
	where, err := s.where(&q, &a)
	if err != nil {
		return err
	}
	rs, done, err := s.c.Query(ctx, `SELECT `+s.selectLegs()+` FROM cdr WHERE `+where+` ORDER BY calldate DESC, uniqueid DESC, sequence DESC`, a...)
	if err != nil {
		return fmt.Errorf("history: export: %w", err)
	}
	defer done()
	for rs.Next() {
		c, err := scanLeg(rs.Scan)
		if err != nil {
			return fmt.Errorf("history: export: %w", err)
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	if err := rs.Err(); err != nil {
		return fmt.Errorf("history: export: %w", err)
	}
	return nil
}

// insertBatch is the rows per INSERT statement (20 parameters each).
const insertBatch = 200

// Insert implements Store.
func (s *SQLStore) Insert(ctx context.Context, cdrs []CDR) error {
	err := s.c.InTx(ctx, func(tx conn) error {
		for chunk := range slices.Chunk(cdrs, insertBatch) {
			var a args
			var b strings.Builder
			b.WriteString(`INSERT INTO cdr (` + legColumns + `) VALUES `)
			for i, c := range chunk {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(" + strings.Join([]string{a.add(s.ts(c.CallDate)), a.add(c.CLID), a.add(c.Src), a.add(c.Dst),
					a.add(c.DContext), a.add(c.Channel), a.add(c.DstChannel), a.add(c.LastApp), a.add(c.LastData),
					a.add(c.Duration), a.add(c.Billsec), a.add(c.Disposition), a.add(c.AMAFlags), a.add(c.AccountCode),
					a.add(c.UniqueID), a.add(c.LinkedID), a.add(c.UserField), a.add(c.Sequence), a.add(c.PeerAccount),
					a.add(c.RecordingFile)}, ", ") + ")")
			}
			b.WriteString(` ON CONFLICT (uniqueid, sequence) DO NOTHING`)
			if _, err := tx.Exec(ctx, b.String(), a...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("history: insert: %w", err)
	}
	return nil
}

// queueOfCDR names the queue of a leg whose last application was Queue:
// app_queue's name, the first argument of Queue() in LastData, as the live
// state names it; the dialled number when LastData is empty.
func queueOfCDR(l CDR) string {
	name, _, _ := strings.Cut(l.LastData, ",")
	if name = strings.TrimSpace(name); name != "" {
		return name
	}
	return l.Dst
}
