package auth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSessionsSurviveRestart: a second Service over the same store (serve
// restarted) accepts the first one's tokens; logout and revocation are
// stored too, and the file never holds a token.
func TestSessionsSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.json")
	store := NewFileSessions(path)
	clk := newClock()
	s1 := NewService(mustUsers(t), Config{Store: store, Now: clk.Now})
	alice, _ := s1.Login("alice", "secret", "192.0.2.1")
	bob, _ := s1.Login("bob", "secret", "192.0.2.2")
	olga, _ := s1.Login("olga", "secret", "192.0.2.3")
	s1.Logout(bob.Token)
	if !s1.RevokeSession(olga.ID, "") {
		t.Fatal("RevokeSession")
	}
	b, _ := os.ReadFile(path)
	for _, tok := range []string{alice.Token, alice.RefreshToken} {
		if len(tok) == 0 || strings.Contains(string(b), tok) {
			t.Fatal("a token is in the sessions file")
		}
	}

	s2 := NewService(mustUsers(t), Config{Store: store, Now: clk.Now})
	if n, err := s2.LoadSessions(context.Background()); err != nil || n != 1 {
		t.Fatalf("LoadSessions: %d, %v", n, err)
	}
	if u, exp, err := s2.Authenticate(alice.Token); err != nil || u.Username != "alice" || !exp.Equal(alice.ExpiresAt) {
		t.Fatalf("alice after restart: %v, %v, %v", u, exp, err)
	}
	for _, tok := range []string{bob.Token, olga.Token} {
		if _, _, err := s2.Authenticate(tok); !errors.Is(err, ErrTokenUnknown) {
			t.Errorf("revoked session back after restart: %v", err)
		}
	}
	// The refresh token survives too, once.
	next, err := s2.Refresh(alice.RefreshToken, "192.0.2.1")
	if err != nil || next.Token == alice.Token || next.User.Username != "alice" {
		t.Fatalf("Refresh: %+v, %v", next, err)
	}
	if _, err := s2.Refresh(alice.RefreshToken, "192.0.2.1"); !errors.Is(err, ErrTokenUnknown) {
		t.Errorf("second use of a refresh token: %v", err)
	}
	// Expiry is explicit: the access token ends at its time, the refresh
	// token later.
	clk.Add(DefaultTokenTTL)
	if _, _, err := s2.Authenticate(next.Token); !errors.Is(err, ErrTokenExpired) {
		t.Errorf("after the TTL: %v", err)
	}
	if _, err := s2.Refresh(next.RefreshToken, "192.0.2.1"); err != nil {
		t.Errorf("refresh after the access token expired: %v", err)
	}
	clk.Add(DefaultRefreshTTL + time.Hour)
	s2.Sweep()
	if recs, _ := store.LoadSessions(context.Background()); len(recs) != 0 {
		t.Errorf("%d sessions left in the store after expiry and sweep", len(recs))
	}
}

// brokenStore is a database that is down.
type brokenStore struct{}

var errDown = errors.New("database down")

func (brokenStore) LoadSessions(context.Context) ([]SessionRecord, error) { return nil, errDown }
func (brokenStore) PutSession(context.Context, SessionRecord) error       { return errDown }
func (brokenStore) DeleteSessions(context.Context, []string) error        { return errDown }

// TestFallbackKeepsSessionsAndRevocations: with the database down,
// sessions go to the file, and a revocation of a session the database
// still holds is kept as a tombstone so it does not come back.
func TestFallbackKeepsSessionsAndRevocations(t *testing.T) {
	ctx := context.Background()
	db := NewFileSessions(filepath.Join(t.TempDir(), "db.json")) // stands for the database
	file := NewFileSessions(filepath.Join(t.TempDir(), "fallback.json"))
	s1 := NewService(mustUsers(t), Config{Store: Fallback{db, file}})
	alice, _ := s1.Login("alice", "secret", "192.0.2.1")

	// The database goes down: bob's new session goes to the file, alice's
	// logout becomes a tombstone there.
	s2 := NewService(mustUsers(t), Config{Store: Fallback{brokenStore{}, file}})
	if _, err := s2.LoadSessions(ctx); !errors.Is(err, errDown) {
		t.Fatalf("load with the database down: %v", err)
	}
	s2.tokens.add(mustRecord(t, db, alice.ID))
	bob, _ := s2.Login("bob", "secret", "192.0.2.2")
	s2.Logout(alice.Token)

	// Back up: bob's session is there, alice's is not.
	s3 := NewService(mustUsers(t), Config{Store: Fallback{db, file}})
	if n, err := s3.LoadSessions(ctx); err != nil || n != 1 {
		t.Fatalf("LoadSessions: %d, %v", n, err)
	}
	if _, _, err := s3.Authenticate(bob.Token); err != nil {
		t.Errorf("bob: %v", err)
	}
	if _, _, err := s3.Authenticate(alice.Token); !errors.Is(err, ErrTokenUnknown) {
		t.Errorf("alice's revoked session came back: %v", err)
	}
	if recs, _ := db.LoadSessions(ctx); len(recs) != 0 {
		t.Errorf("the tombstone was not applied to the database: %d left", len(recs))
	}
}

func mustRecord(t *testing.T, st SessionStore, id string) SessionRecord {
	t.Helper()
	recs, err := st.LoadSessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no session %s", id)
	return SessionRecord{}
}

// TestUnknownTokenWhileSessionsLoad: until the store has been read back
// completely, an unknown token is "try again" (503), not "log in again".
func TestUnknownTokenWhileSessionsLoad(t *testing.T) {
	file := NewFileSessions(filepath.Join(t.TempDir(), "f.json"))
	s := NewService(mustUsers(t), Config{Store: Fallback{brokenStore{}, file}})
	s.LoadSessions(context.Background())
	if _, _, err := s.Authenticate("x"); !errors.Is(err, ErrSessionsLoading) {
		t.Errorf("database not read yet: %v", err)
	}
	s2 := NewService(mustUsers(t), Config{Store: file})
	s2.LoadSessions(context.Background())
	if _, _, err := s2.Authenticate("x"); !errors.Is(err, ErrTokenUnknown) {
		t.Errorf("all read: %v", err)
	}
	if n := testing.AllocsPerRun(100, func() { s.Authenticate("x") }); n != 0 {
		t.Errorf("Authenticate allocates %v times", n)
	}
}

// TestReadBackNeverRevives: a session revoked while the stored sessions
// were still being read back (the database answering late after a
// restart), or whose deletion the store missed, stays revoked when the
// read-back lands.
func TestReadBackNeverRevives(t *testing.T) {
	store := NewFileSessions(filepath.Join(t.TempDir(), "sessions.json"))
	clk := newClock()
	s := NewService(mustUsers(t), Config{Store: store, Now: clk.Now})
	alice, err := s.Login("alice", "secret", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := store.LoadSessions(context.Background()) // what a slow read-back got before the revocation
	if !s.RevokeSession(alice.ID, "") {
		t.Fatal("RevokeSession")
	}
	for _, r := range recs {
		store.PutSession(context.Background(), r) // the store missed the deletion
	}
	if n, err := s.LoadSessions(context.Background()); err != nil || n != 0 {
		t.Errorf("LoadSessions added %d (%v), want 0", n, err)
	}
	if _, _, err := s.Authenticate(alice.Token); !errors.Is(err, ErrTokenUnknown) {
		t.Errorf("revoked session back after a read-back: %v", err)
	}
}
