package nethcti

import (
	"context"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/ctibridge/ctibridge/sqldb"
)

// Store keeps what the front keeps per user: NethCTI's user settings
// (default_extension among them) and the persistent tokens. SQLStore is
// the bridge's database; MemStore is memory (tests, and a bridge with no
// local database: persistent tokens and settings then end with the
// process).
type Store interface {
	// Settings returns a user's settings (name → JSON value); none is an
	// empty map, not an error.
	Settings(ctx context.Context, username string) (map[string]json.RawMessage, error)
	// SettingOfAll returns one setting of every user who has it (user
	// name → JSON value): the avatars.
	SettingOfAll(ctx context.Context, name string) (map[string]json.RawMessage, error)
	// PutSetting sets one (a JSON value).
	PutSetting(ctx context.Context, username, name string, value json.RawMessage) error
	// Tokens lists every persistent token.
	Tokens(ctx context.Context) ([]TokenRecord, error)
	// PutToken stores a persistent token, replacing the user's token of
	// the same audience.
	PutToken(ctx context.Context, t TokenRecord) error
	// DeleteToken removes a user's token of one audience (none: no error).
	DeleteToken(ctx context.Context, username, audience string) error
}

// TokenRecord is one persistent token: the SHA-256 of the token, never
// the token.
type TokenRecord struct {
	Username string
	Audience string // phone-island, mobile-app, nethlink; legacy:... for a legacy-scheme token
	Hash     [32]byte
	Created  time.Time
}

// MemStore is a Store in memory. Safe for concurrent use.
type MemStore struct {
	mu       sync.Mutex
	settings map[string]map[string]json.RawMessage
	tokens   map[[2]string]TokenRecord
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{settings: map[string]map[string]json.RawMessage{}, tokens: map[[2]string]TokenRecord{}}
}

func (m *MemStore) Settings(_ context.Context, username string) (map[string]json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := maps.Clone(m.settings[username])
	if out == nil {
		out = map[string]json.RawMessage{}
	}
	return out, nil
}

func (m *MemStore) SettingOfAll(_ context.Context, name string) (map[string]json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]json.RawMessage{}
	for u, s := range m.settings {
		if v, ok := s[name]; ok {
			out[u] = v
		}
	}
	return out, nil
}

func (m *MemStore) PutSetting(_ context.Context, username, name string, value json.RawMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.settings[username] == nil {
		m.settings[username] = map[string]json.RawMessage{}
	}
	m.settings[username][name] = append(json.RawMessage(nil), value...)
	return nil
}

func (m *MemStore) Tokens(context.Context) ([]TokenRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]TokenRecord, 0, len(m.tokens))
	for _, t := range m.tokens {
		out = append(out, t)
	}
	return out, nil
}

func (m *MemStore) PutToken(_ context.Context, t TokenRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tokens[[2]string{t.Username, t.Audience}] = t
	return nil
}

func (m *MemStore) DeleteToken(_ context.Context, username, audience string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.tokens, [2]string{username, audience})
	return nil
}

//go:embed migrations
var migrations embed.FS

// Schema is the front's tables' migrations (sqldb.Schema), named
// "nethcti" in the shared migrations table.
var Schema = sqldb.Schema{FS: migrations, Component: "nethcti", Lock: 7242029}

// SQLStore is a Store in the bridge's database (SQLite or PostgreSQL,
// migrated with Schema). Safe for concurrent use.
type SQLStore struct{ c sqldb.Conn }

// NewSQLStore returns the store over c (a sqldb.Gate's Conn: while the
// database is down its calls fail at once with sqldb.ErrUnavailable).
func NewSQLStore(c sqldb.Conn) *SQLStore { return &SQLStore{c: c} }

func (s *SQLStore) Settings(ctx context.Context, username string) (map[string]json.RawMessage, error) {
	return s.settings(ctx, `SELECT name, value FROM nethcti_settings WHERE username = $1`, username)
}

func (s *SQLStore) SettingOfAll(ctx context.Context, name string) (map[string]json.RawMessage, error) {
	return s.settings(ctx, `SELECT username, value FROM nethcti_settings WHERE name = $1`, name)
}

// settings reads (key, value) rows of query into a map, leaving out a
// value that is not JSON.
func (s *SQLStore) settings(ctx context.Context, query, arg string) (map[string]json.RawMessage, error) {
	rows, done, err := s.c.Query(ctx, query, arg)
	if err != nil {
		return nil, fmt.Errorf("nethcti: settings: %w", err)
	}
	defer done()
	out := map[string]json.RawMessage{}
	for rows.Next() {
		var key, value string
		if err := rows.Scan(&key, &value); err != nil {
			return nil, fmt.Errorf("nethcti: settings: %w", err)
		}
		if json.Valid([]byte(value)) {
			out[key] = json.RawMessage(value)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("nethcti: settings: %w", err)
	}
	return out, nil
}

func (s *SQLStore) PutSetting(ctx context.Context, username, name string, value json.RawMessage) error {
	_, err := s.c.Exec(ctx, `INSERT INTO nethcti_settings (username, name, value) VALUES ($1, $2, $3)
		ON CONFLICT (username, name) DO UPDATE SET value = excluded.value`, username, name, string(value))
	if err != nil {
		return fmt.Errorf("nethcti: put setting: %w", err)
	}
	return nil
}

func (s *SQLStore) Tokens(ctx context.Context) ([]TokenRecord, error) {
	rows, done, err := s.c.Query(ctx, `SELECT username, audience, hash, created_ns FROM nethcti_tokens`)
	if err != nil {
		return nil, fmt.Errorf("nethcti: tokens: %w", err)
	}
	defer done()
	var out []TokenRecord
	var bad error
	for rows.Next() {
		var t TokenRecord
		var h string
		var ns int64
		if err := rows.Scan(&t.Username, &t.Audience, &h, &ns); err != nil {
			return out, fmt.Errorf("nethcti: tokens: %w", err)
		}
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != len(t.Hash) {
			bad = errors.New("nethcti: tokens: malformed hash of " + t.Username)
			continue
		}
		copy(t.Hash[:], b)
		t.Created = time.Unix(0, ns)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("nethcti: tokens: %w", err)
	}
	return out, bad
}

func (s *SQLStore) PutToken(ctx context.Context, t TokenRecord) error {
	_, err := s.c.Exec(ctx, `INSERT INTO nethcti_tokens (username, audience, hash, created_ns) VALUES ($1, $2, $3, $4)
		ON CONFLICT (username, audience) DO UPDATE SET hash = excluded.hash, created_ns = excluded.created_ns`,
		t.Username, t.Audience, hex.EncodeToString(t.Hash[:]), t.Created.UnixNano())
	if err != nil {
		return fmt.Errorf("nethcti: put token: %w", err)
	}
	return nil
}

func (s *SQLStore) DeleteToken(ctx context.Context, username, audience string) error {
	if _, err := s.c.Exec(ctx, `DELETE FROM nethcti_tokens WHERE username = $1 AND audience = $2`, username, audience); err != nil {
		return fmt.Errorf("nethcti: delete token: %w", err)
	}
	return nil
}
