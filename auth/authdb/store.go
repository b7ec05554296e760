package authdb

import (
	"context"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/sqldb"
)

//go:embed migrations
var migrations embed.FS

// Schema is the session table's migrations (sqldb.Schema): their rows in
// the shared migrations table are named "sessions"; the lock number
// serialises concurrent starts on PostgreSQL.
var Schema = sqldb.Schema{FS: migrations, Component: "sessions", Lock: 7242003}

// Store is the session table. Safe for concurrent use.
type Store struct {
	c sqldb.Conn
}

// New returns the store over a migrated database (a sqldb.Gate's Conn:
// while the database is down, calls fail at once and auth.Fallback takes
// them).
func New(c sqldb.Conn) *Store { return &Store{c: c} }

// NewPostgres returns the store over a migrated PostgreSQL pool.
func NewPostgres(pool *pgxpool.Pool) *Store { return &Store{c: sqldb.Pgx(pool)} }

// NewSQLite returns the store over a migrated SQLite database.
func NewSQLite(db *sql.DB) *Store { return &Store{c: sqldb.SQL(db)} }

func ns(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNS(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func hexOf(h [32]byte) string {
	if h == ([32]byte{}) {
		return ""
	}
	return hex.EncodeToString(h[:])
}

func parseHash(s string) ([32]byte, error) {
	var h [32]byte
	if s == "" {
		return h, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("authdb: bad hash %q", s)
	}
	copy(h[:], b)
	return h, nil
}

// LoadSessions implements auth.SessionStore. A malformed row is an error,
// reported with the rows that could be read.
func (s *Store) LoadSessions(ctx context.Context) ([]auth.SessionRecord, error) {
	rows, done, err := s.c.Query(ctx, `SELECT `+sessionCols+` FROM auth_sessions`)
	if err != nil {
		return nil, fmt.Errorf("authdb: load: %w", err)
	}
	defer done()
	var out []auth.SessionRecord
	var bad error
	for rows.Next() {
		r, err := scanSession(rows.Scan)
		if errors.Is(err, errMalformed) {
			bad = fmt.Errorf("authdb: load: %w", err)
			continue
		}
		if err != nil {
			return out, fmt.Errorf("authdb: load: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("authdb: load: %w", err)
	}
	return out, bad
}

// PutSession implements auth.SessionStore.
func (s *Store) PutSession(ctx context.Context, r auth.SessionRecord) error {
	_, err := s.c.Exec(ctx, `INSERT INTO auth_sessions (id, username, access_hash, refresh_hash, created_ns, expires_ns, refresh_expires_ns, client_addr)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (id) DO UPDATE SET username = excluded.username, access_hash = excluded.access_hash,
			refresh_hash = excluded.refresh_hash, created_ns = excluded.created_ns, expires_ns = excluded.expires_ns,
			refresh_expires_ns = excluded.refresh_expires_ns, client_addr = excluded.client_addr`,
		r.ID, r.Username, hexOf(r.AccessHash), hexOf(r.RefreshHash), ns(r.Created), ns(r.Expires), ns(r.RefreshExp), r.ClientAddr)
	if err != nil {
		return fmt.Errorf("authdb: put: %w", err)
	}
	return nil
}

// DeleteSessions implements auth.SessionStore.
func (s *Store) DeleteSessions(ctx context.Context, ids []string) error {
	err := s.c.InTx(ctx, func(tx sqldb.Conn) error {
		for _, id := range ids {
			if _, err := tx.Exec(ctx, `DELETE FROM auth_sessions WHERE id = $1`, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("authdb: delete: %w", err)
	}
	return nil
}
