package authdb

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/bcrypt"
	_ "modernc.org/sqlite"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func backends(t *testing.T) map[string]func(t *testing.T) *Store {
	return map[string]func(t *testing.T) *Store{
		"sqlite": func(t *testing.T) *Store {
			db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "s.db")+"?_pragma=busy_timeout(10000)&_txlock=immediate")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if _, err := Schema.MigrateSQLite(context.Background(), db); err != nil {
				t.Fatal(err)
			}
			return NewSQLite(db)
		},
		"postgres": func(t *testing.T) *Store {
			pool, err := pgxpool.New(context.Background(), dbtest.Postgres(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			if _, err := Schema.MigratePostgres(context.Background(), pool); err != nil {
				t.Fatal(err)
			}
			return NewPostgres(pool)
		},
	}
}

func users(t *testing.T) *auth.Users {
	h, _ := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	us, err := auth.NewUsers([]auth.User{
		{Username: "alice", PasswordHash: string(h), Role: auth.RoleUser, Endpoints: []string{"201"}},
		{Username: "bob", PasswordHash: string(h), Role: auth.RoleUser, Endpoints: []string{"202"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return us
}

// TestSessionsSurviveRestart: sessions written through one Service are
// accepted by the next one over the same database (serve restarted):
// access token, expiry, refresh token; logouts stay logged out.
func TestSessionsSurviveRestart(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := open(t)
			s1 := auth.NewService(users(t), auth.Config{Store: st})
			alice, err := s1.Login("alice", "secret", "192.0.2.1")
			if err != nil {
				t.Fatal(err)
			}
			bob, _ := s1.Login("bob", "secret", "192.0.2.2")
			s1.Logout(bob.Token)

			s2 := auth.NewService(users(t), auth.Config{Store: st})
			if n, err := s2.LoadSessions(ctx); err != nil || n != 1 {
				t.Fatalf("LoadSessions: %d, %v", n, err)
			}
			u, exp, err := s2.Authenticate(alice.Token)
			if err != nil || u.Username != "alice" || !exp.Equal(alice.ExpiresAt) {
				t.Fatalf("alice after restart: %v, %v, %v", u, exp, err)
			}
			if _, _, err := s2.Authenticate(bob.Token); err == nil {
				t.Error("bob's logged-out session came back")
			}
			next, err := s2.Refresh(alice.RefreshToken, "192.0.2.1")
			if err != nil {
				t.Fatalf("refresh after restart: %v", err)
			}
			recs, err := st.LoadSessions(ctx)
			if err != nil || len(recs) != 2 {
				t.Fatalf("stored: %d, %v", len(recs), err)
			}
			for _, r := range recs {
				if r.ID == alice.ID && r.RefreshHash != ([32]byte{}) {
					t.Error("the spent refresh token is still stored")
				}
				if r.ID == next.ID && (r.ClientAddr != "192.0.2.1" || r.RefreshExp.Before(time.Now())) {
					t.Errorf("new session stored as %+v", r)
				}
			}
			if n := s2.RevokeUser("alice"); n != 2 {
				t.Errorf("RevokeUser: %d", n)
			}
			if recs, _ := st.LoadSessions(ctx); len(recs) != 0 {
				t.Errorf("%d sessions left after revoking all", len(recs))
			}
		})
	}
}
