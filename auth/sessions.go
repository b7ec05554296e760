package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// SessionStore keeps sessions (hashes only, never a token) across restarts
// of serve. The SQL store (auth/authdb: the embedded SQLite or PostgreSQL)
// and FileSessions satisfy it. Methods are called from any goroutine.
type SessionStore interface {
	// LoadSessions returns every stored session.
	LoadSessions(ctx context.Context) ([]SessionRecord, error)
	// PutSession inserts rec, or replaces the session of the same ID.
	PutSession(ctx context.Context, rec SessionRecord) error
	// DeleteSessions removes the sessions named; unknown IDs are no error.
	DeleteSessions(ctx context.Context, ids []string) error
}

// FileSessions is a SessionStore in one JSON file (mode 0600), rewritten
// whole (write to a temporary file, then rename) on every change: for a
// bridge without a database, and as the fallback of a database that is
// down (Fallback). Safe for concurrent use within one process.
type FileSessions struct {
	path string

	mu sync.Mutex // serialises read-modify-write of the file
}

// NewFileSessions returns the store in path (created on first write).
func NewFileSessions(path string) *FileSessions { return &FileSessions{path: path} }

func (f *FileSessions) read() (map[string]SessionRecord, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]SessionRecord{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("auth: sessions file: %w", err)
	}
	m := map[string]SessionRecord{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("auth: sessions file %s: %w", f.path, err)
	}
	return m, nil
}

func (f *FileSessions) write(m map[string]SessionRecord) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("auth: sessions file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), ".sessions-*")
	if err != nil {
		return fmt.Errorf("auth: sessions file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("auth: sessions file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("auth: sessions file: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return fmt.Errorf("auth: sessions file: %w", err)
	}
	return nil
}

// LoadSessions implements SessionStore.
func (f *FileSessions) LoadSessions(context.Context) ([]SessionRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.read()
	if err != nil {
		return nil, err
	}
	out := make([]SessionRecord, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	return out, nil
}

// PutSession implements SessionStore.
func (f *FileSessions) PutSession(_ context.Context, rec SessionRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.read()
	if err != nil {
		return err
	}
	m[rec.ID] = rec
	return f.write(m)
}

// DeleteSessions implements SessionStore.
func (f *FileSessions) DeleteSessions(_ context.Context, ids []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.read()
	if err != nil {
		return err
	}
	n := len(m)
	for _, id := range ids {
		delete(m, id)
	}
	if len(m) == n {
		return nil
	}
	return f.write(m)
}

// Fallback is a SessionStore writing to Primary (the database) and, when
// that fails, to Secondary (a file), so sessions made while the database
// is down also survive a restart. A revocation the database cannot take
// is written to the file as a tombstone, so the session does not come
// back at the next start (never an open door); the next load retries it.
// Loading merges both.
type Fallback struct {
	Primary, Secondary SessionStore
}

// LoadSessions implements SessionStore: it fails only when both fail.
func (f Fallback) LoadSessions(ctx context.Context) ([]SessionRecord, error) {
	a, errA := f.Primary.LoadSessions(ctx)
	b, errB := f.Secondary.LoadSessions(ctx)
	if errA != nil && errB != nil {
		return nil, errors.Join(errA, errB)
	}
	dead := map[string]bool{}
	var tombs []string
	for _, r := range b {
		if r.Revoked {
			dead[r.ID] = true
			tombs = append(tombs, r.ID)
		}
	}
	var out []SessionRecord
	for _, r := range append(a, b...) {
		if !dead[r.ID] {
			dead[r.ID] = true // once
			out = append(out, r)
		}
	}
	if errA != nil {
		return out, errA // the file's sessions, and why the database's are missing
	}
	if len(tombs) > 0 && f.Primary.DeleteSessions(ctx, tombs) == nil {
		f.Secondary.DeleteSessions(ctx, tombs) // the database has them gone now
	}
	return out, nil
}

// PutSession implements SessionStore.
func (f Fallback) PutSession(ctx context.Context, rec SessionRecord) error {
	if err := f.Primary.PutSession(ctx, rec); err != nil {
		if err2 := f.Secondary.PutSession(ctx, rec); err2 != nil {
			return errors.Join(err, err2)
		}
	}
	return nil
}

// DeleteSessions implements SessionStore.
func (f Fallback) DeleteSessions(ctx context.Context, ids []string) error {
	if errA := f.Primary.DeleteSessions(ctx, ids); errA != nil {
		var errs []error
		for _, id := range ids {
			if err := f.Secondary.PutSession(ctx, SessionRecord{ID: id, Revoked: true}); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return errors.Join(append(errs, errA)...)
		}
		return nil
	}
	return f.Secondary.DeleteSessions(ctx, ids)
}
