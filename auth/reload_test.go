package auth

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

// TestCheckUsersReportsEveryUser: check-config shows every bad user at
// once, while ParseUsers (serve) still stops at the first.
func TestCheckUsersReportsEveryUser(t *testing.T) {
	h := testHash()
	data := `users:
  - username: alice
    password_hash: "` + h + `"
    role: boss
  - username: bob
    password_hash: "` + h + `"
  - username: carol
    password_hash: nothash
  - username: bob
    password_hash: "` + h + `"
  - username: dave
    password_hash: "` + h + `"
    colour: blue
`
	us, errs := CheckUsers("u.yaml", []byte(data))
	if us != nil {
		t.Error("users returned despite errors")
	}
	want := []string{
		`u.yaml:4: user "alice": key "role": unknown role "boss"`,
		`u.yaml:8: user "carol": key "password_hash": not a bcrypt hash`,
		`u.yaml:9: user "bob": key "username": duplicate user (first defined at line 5)`,
		`u.yaml:13: user "dave": key "colour": unknown key`,
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d: %v", len(errs), len(want), errs)
	}
	for i, w := range want {
		var ue *UsersError
		if !errors.As(errs[i], &ue) || !strings.Contains(errs[i].Error(), w) {
			t.Errorf("error %d = %v, want it to contain %q", i, errs[i], w)
		}
	}
	if _, err := ParseUsers("u.yaml", []byte(data)); err == nil || err.Error() != errs[0].Error() {
		t.Errorf("ParseUsers: %v, want the first of CheckUsers's", err)
	}
	if us, errs := CheckUsers("u.yaml", []byte(usersYAML())); len(errs) > 0 || us.Len() != 5 {
		t.Errorf("valid file: %v, %d users", errs, us.Len())
	}
}

// TestServiceSetUsers: a reloaded users file takes effect at once; the
// sessions of an unchanged user (a new display name aside) survive, those
// of a user whose grants changed and of a removed user end, and their
// watchers (open WebSockets) are told.
func TestServiceSetUsers(t *testing.T) {
	s := NewService(mustUsers(t), Config{})
	login := func(name string) Session {
		t.Helper()
		sess, err := s.Login(name, "secret", "192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}
	alice, bob, olga := login("alice"), login("bob"), login("olga")
	told := map[string]bool{}
	var mu sync.Mutex
	for name, sess := range map[string]Session{"alice": alice, "bob": bob, "olga": olga} {
		s.OnRevoke(sess.Token, func() { mu.Lock(); told[name] = true; mu.Unlock() })
	}
	h := testHash()
	next, err := ParseUsers("users.yaml", []byte(`users:
  - username: alice
    password_hash: "`+h+`"
    role: operator
    endpoints: ["201"]
    groups: ["reception"]
  - username: olga
    name: Olga the Operator
    password_hash: "`+h+`"
    role: operator
    endpoints: ["203"]
    groups: ["reception"]
  - username: zoe
    password_hash: "`+h+`"
`))
	if err != nil {
		t.Fatal(err)
	}

	// Readers racing the swap see one set or the other, never a torn one.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if u, _, err := s.Authenticate(olga.Token); err != nil || u.Role != RoleOperator {
					t.Errorf("during swap: %v, %v", u, err)
					return
				}
			}
		})
	}
	if n := s.SetUsers(next); n != 2 {
		t.Errorf("revoked %d sessions, want alice's (role changed) and bob's (removed)", n)
	}
	wg.Wait()

	if u, _, err := s.Authenticate(olga.Token); err != nil || u.Name != "Olga the Operator" {
		t.Errorf("olga after reload: %v, %v (want her session kept, new name)", u, err)
	}
	for _, sess := range []Session{alice, bob} {
		if _, _, err := s.Authenticate(sess.Token); !errors.Is(err, ErrTokenUnknown) {
			t.Errorf("%s after reload: %v, want ErrTokenUnknown", sess.User.Username, err)
		}
	}
	mu.Lock()
	if !told["alice"] || !told["bob"] || told["olga"] {
		t.Errorf("watchers told: %v", told)
	}
	mu.Unlock()
	if _, err := s.Login("zoe", "secret", "192.0.2.2"); err != nil {
		t.Errorf("new user zoe: %v", err)
	}
	if s.Users().Len() != 3 {
		t.Errorf("Users().Len() = %d", s.Users().Len())
	}
	s.SetUsers(nil)
	if _, _, err := s.Authenticate(olga.Token); !errors.Is(err, ErrTokenUnknown) {
		t.Errorf("after SetUsers(nil): %v", err)
	}
}

// TestReloadScopeChangeEndsSessions: when a colleague leaves an
// operator's group, the operator's scope shrinks: her sessions end (an
// open WebSocket would otherwise go on with the old scope).
func TestReloadScopeChangeEndsSessions(t *testing.T) {
	s := NewService(mustUsers(t), Config{})
	olga, err := s.Login("olga", "secret", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	next, err := ParseUsers("users.yaml", []byte(strings.Replace(usersYAML(), `groups: ["reception"]`, `groups: ["sales"]`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	s.SetUsers(next)
	if _, _, err := s.Authenticate(olga.Token); !errors.Is(err, ErrTokenUnknown) {
		t.Errorf("olga after her colleague left the group: %v", err)
	}
}
