package authdb

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/dbtest"
)

// sharedNodes starts two Services, as two nodes would be, each with a
// pool of its own on one PostgreSQL schema, running (listening) until the
// test ends.
func sharedNodes(t *testing.T) (a, b *auth.Service, stA *Store) {
	t.Helper()
	return sharedNodesWith(t, auth.Config{})
}

// sharedNodesWith is sharedNodes with cfg's limits (its stores are set
// here).
func sharedNodesWith(t *testing.T, cfg auth.Config) (a, b *auth.Service, stA *Store) {
	t.Helper()
	dsn := dbtest.Postgres(t)
	node := func() (*auth.Service, *Store) {
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		if _, err := Schema.MigratePostgres(context.Background(), pool); err != nil {
			t.Fatal(err)
		}
		st := NewPostgres(pool)
		c := cfg
		c.Store, c.Shared = st, st
		s := auth.NewService(users(t), c)
		if _, err := s.LoadSessions(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		return s, st
	}
	a, stA = node()
	b, _ = node()
	dbtest.WaitFor(t, "both nodes listening", func() bool { return a.SharedStats().Listening && b.SharedStats().Listening })
	return a, b, stA
}

// TestSharedSessionsMoveAndEnd: a token issued by node A is accepted by
// node B; its refresh token is spent once across the two; a logout on A
// makes it unknown on B and tells B's watcher (a WebSocket) within 1 s,
// and a logout on B of a token fresh from A ends it on A.
func TestSharedSessionsMoveAndEnd(t *testing.T) {
	a, b, _ := sharedNodes(t)
	alice, err := a.Login("alice", "secret", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if u, _, err := b.Authenticate(alice.Token); err != nil || u.Username != "alice" {
		t.Fatalf("A's token on B: %v, %v", u, err)
	}
	next, err := b.Refresh(alice.RefreshToken, "192.0.2.1")
	if err != nil {
		t.Fatalf("A's refresh token on B: %v", err)
	}
	if _, err := a.Refresh(alice.RefreshToken, "192.0.2.1"); !errors.Is(err, auth.ErrTokenUnknown) {
		t.Fatalf("the refresh token spent on B, again on A: %v", err)
	}
	if _, _, err := a.Authenticate(next.Token); err != nil {
		t.Fatalf("B's new token on A: %v", err)
	}

	closed := make(chan time.Time, 1)
	stop := b.OnRevoke(alice.Token, func() { closed <- time.Now() })
	defer stop()
	start := time.Now()
	a.Logout(alice.Token)
	select {
	case at := <-closed:
		t.Logf("B's watcher told %v after the logout on A", at.Sub(start))
	case <-time.After(time.Second):
		t.Fatal("B's watcher not told within 1 s of the logout on A")
	}
	if _, _, err := b.Authenticate(alice.Token); err == nil {
		t.Error("the token logged out on A still works on B")
	}
	if _, _, err := b.Authenticate(next.Token); err != nil {
		t.Errorf("the other session ended too: %v", err)
	}
	if st := b.SharedStats(); st.Revoked != 1 || st.Found == 0 || st.Resyncs == 0 {
		t.Errorf("B's stats %+v", st)
	}
	// A logout on B of a token A issued a moment ago, B may not have
	// heard of yet: ended on A too.
	bob, _ := a.Login("bob", "secret", "192.0.2.2")
	b.Logout(bob.Token)
	deadline := time.Now().Add(time.Second)
	for {
		if _, _, err := a.Authenticate(bob.Token); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a logout on B of A's fresh token: still valid on A after 1 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSharedSessionsConcurrentRefresh: one refresh token spent on both
// nodes at once gives one new session.
func TestSharedSessionsConcurrentRefresh(t *testing.T) {
	a, b, _ := sharedNodes(t)
	for range 10 {
		s, err := a.Login("bob", "secret", "192.0.2.2")
		if err != nil {
			t.Fatal(err)
		}
		b.Authenticate(s.Token) // B holds it too
		errs := make(chan error, 2)
		for _, n := range []*auth.Service{a, b} {
			go func() { _, err := n.Refresh(s.RefreshToken, "192.0.2.2"); errs <- err }()
		}
		e1, e2 := <-errs, <-errs
		if (e1 == nil) == (e2 == nil) {
			t.Fatalf("one refresh token spent twice or never: %v, %v", e1, e2)
		}
	}
}

// TestSharedSessionsResync: a logout made while B was not listening (its
// session deleted straight in the table) ends the session on B once it
// listens again; and a made-up token is looked up, never held.
func TestSharedSessionsResync(t *testing.T) {
	a, b, stA := sharedNodes(t)
	alice, _ := a.Login("alice", "secret", "192.0.2.1")
	if _, _, err := b.Authenticate(alice.Token); err != nil {
		t.Fatal(err)
	}
	// Deleting the row of a trigger-less copy is what a missed
	// notification looks like to B: the row is gone, nobody said so.
	ctx := context.Background()
	if _, err := stA.c.Exec(ctx, `ALTER TABLE auth_sessions DISABLE TRIGGER auth_sessions_notify`); err != nil {
		t.Fatal(err)
	}
	if err := stA.DeleteSessions(ctx, []string{alice.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := stA.c.Exec(ctx, `ALTER TABLE auth_sessions ENABLE TRIGGER auth_sessions_notify`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Authenticate(alice.Token); err != nil {
		t.Fatalf("B heard a change nobody announced: %v", err)
	}
	// The listening links drop (the server ends them; those of tests
	// running at the same time too, which only resync): B listens again
	// and reads the table whole.
	if _, err := stA.c.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, ListenerName); err != nil {
		t.Fatal(err)
	}
	dbtest.WaitFor(t, "B to find the session gone", func() bool {
		_, _, err := b.Authenticate(alice.Token)
		return err != nil
	})
	if _, _, err := b.Authenticate("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"); !errors.Is(err, auth.ErrTokenUnknown) {
		t.Errorf("made-up token: %v", err)
	}
}
