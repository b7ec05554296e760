package auth

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// testHash is a cheap (MinCost) hash of "secret", so tests stay fast.
var testHash = sync.OnceValue(func() string {
	h, err := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	if err != nil {
		panic(err)
	}
	return string(h)
})

func usersYAML() string {
	h := testHash()
	return `users:
  - username: alice
    name: Alice Rossi
    password_hash: "` + h + `"
    role: user
    endpoints: ["201"]
    groups: ["reception"]
  - username: paula
    name: Paula Panel
    password_hash: "` + h + `"
    role: user
    endpoints: ["205"]
    permissions: [operator_panel]
  - username: bob
    name: Bob Verdi
    password_hash: "` + h + `"
    endpoints: [202, "212"]
    groups: [sales]
  - username: olga
    name: Olga Operator
    password_hash: "` + h + `"
    role: operator
    endpoints: ["203"]
    groups: ["reception"]
  - username: root
    password_hash: "` + h + `"
    role: admin
`
}

func mustUsers(t testing.TB) *Users {
	t.Helper()
	us, err := ParseUsers("users.yaml", []byte(usersYAML()))
	if err != nil {
		t.Fatal(err)
	}
	return us
}

func TestParseUsers(t *testing.T) {
	us := mustUsers(t)
	if us.Len() != 5 {
		t.Fatalf("got %d users", us.Len())
	}
	bob, _ := us.Lookup("bob")
	if bob.Role != RoleUser || strings.Join(bob.Endpoints, ",") != "202,212" || bob.Name != "Bob Verdi" {
		t.Errorf("bob = %+v", bob)
	}
	olga, _ := us.Lookup("olga")
	if got := strings.Join(olga.Scope(), ","); got != "201,203" {
		t.Errorf("olga's scope = %s, want 201,203 (her own and alice's, same group)", got)
	}
	if root, _ := us.Lookup("root"); root.Scope() != nil || root.Role != RoleAdmin {
		t.Errorf("root = %+v", root)
	}
	if _, ok := us.Lookup("nobody"); ok {
		t.Error("found nobody")
	}
	if us.All()[0].Username != "alice" {
		t.Error("file order not kept")
	}
}

func TestParseUsersErrors(t *testing.T) {
	h := testHash()
	user := func(extra string) string {
		return "users:\n  - username: alice\n    password_hash: \"" + h + "\"\n" + extra
	}
	cases := []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"empty", "", []string{"users.yaml", "empty"}},
		{"unknown top key", "people: []\n", []string{"users.yaml:1", `key "people"`, "unknown key"}},
		{"users not a list", "users: 3\n", []string{`key "users"`, "list"}},
		{"user not a mapping", "users:\n  - alice\n", []string{"users.yaml:2", "mapping"}},
		{"unknown key", user("    rol: admin\n"), []string{"users.yaml:4", `user "alice"`, `key "rol"`, "unknown key"}},
		{"bad role", user("    role: superuser\n"), []string{"users.yaml:4", `user "alice"`, `key "role"`, "superuser"}},
		{"malformed hash", "users:\n  - username: alice\n    password_hash: \"$2a$10$short\"\n", []string{"users.yaml:3", `user "alice"`, `key "password_hash"`, "bcrypt"}},
		{"plain text password", "users:\n  - username: alice\n    password_hash: secret\n", []string{`key "password_hash"`, "bcrypt"}},
		{"missing hash", "users:\n  - username: alice\n    role: user\n", []string{`user "alice"`, `key "password_hash"`, "missing"}},
		{"missing username", "users:\n  - password_hash: \"" + h + "\"\n", []string{`key "username"`, "missing"}},
		{"duplicate user", user("  - username: alice\n    password_hash: \"" + h + "\"\n"), []string{"users.yaml:4", `user "alice"`, "duplicate", "line 2"}},
		{"key twice", user("    role: user\n    role: admin\n"), []string{`key "role"`, "twice"}},
		{"bad endpoint", user("    endpoints: [\"201\\r\\nAction: Originate\"]\n"), []string{`key "endpoints"`, "only 0-9"}},
		{"endpoints not a list", user("    endpoints: \"201\"\n"), []string{`key "endpoints"`, "list"}},
		{"unknown permission", user("    permissions: [everything]\n"), []string{`key "permissions"`, "everything"}},
		{"group with space", user("    groups: [\"front desk\"]\n"), []string{`key "groups"`, "space"}},
		{"yaml syntax", "users: [\n", []string{"users.yaml"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseUsers("users.yaml", []byte(c.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			var ue *UsersError
			if !errors.As(err, &ue) {
				t.Errorf("error %T is not a *UsersError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestEmptyUsersList(t *testing.T) {
	us, err := ParseUsers("u.yaml", []byte("users:\n"))
	if err != nil || us.Len() != 0 {
		t.Fatalf("got %v, %v", us, err)
	}
}

// TestAllowed is the permission table of docs/design.md "Users and permissions".
func TestAllowed(t *testing.T) {
	us := mustUsers(t)
	get := func(n string) *User { u, _ := us.Lookup(n); return u }
	alice, paula, bob, olga, root := get("alice"), get("paula"), get("bob"), get("olga"), get("root")
	acting := []Action{Call, Hangup, Transfer, Park, Pickup, Record, Spy, Intrude, SetDND, SetCallForward, QueueMembership, Conference}
	type row struct {
		user     *User
		endpoint string
		see, act bool
	}
	rows := []row{
		{alice, "201", true, true},   // own
		{alice, "202", false, false}, // someone else's
		{alice, "203", false, false}, // same group, but alice is a user
		{alice, "", false, false},    // trunk/queue/parked calls
		{paula, "205", true, true},   // own
		{paula, "201", true, false},  // operator_panel: sees, does not act
		{paula, "", true, false},     // sees calls no extension owns
		{bob, "212", true, true},     // second own endpoint
		{bob, "201", false, false},   //
		{olga, "203", true, true},    // own
		{olga, "201", true, true},    // her group
		{olga, "202", false, false},  // not her group
		{olga, "", true, false},      // operators see trunk/queue calls
		{root, "202", true, true},    // admin
		{root, "999", true, true},    // admin, even unknown endpoints
		{nil, "201", false, false},   // nobody
	}
	for _, r := range rows {
		name := "nil"
		if r.user != nil {
			name = r.user.Username
		}
		if got := Allowed(r.user, SeeCalls, r.endpoint); got != r.see {
			t.Errorf("Allowed(%s, see_calls, %q) = %v, want %v", name, r.endpoint, got, r.see)
		}
		for _, a := range acting {
			if got := Allowed(r.user, a, r.endpoint); got != r.act {
				t.Errorf("Allowed(%s, %s, %q) = %v, want %v", name, a, r.endpoint, got, r.act)
			}
		}
	}
	// Parked calls: a plain user may not take them, even to its own phone.
	for _, c := range []struct {
		u        *User
		endpoint string
		want     bool
	}{{alice, "201", false}, {paula, "205", true}, {paula, "201", false}, {olga, "201", true}, {root, "1", true}} {
		if got := Allowed(c.u, PickupParking, c.endpoint); got != c.want {
			t.Errorf("Allowed(%s, pickup_parking, %s) = %v", c.u.Username, c.endpoint, got)
		}
	}
	for _, u := range []*User{alice, paula, bob, olga} {
		if Allowed(u, SwitchboardHistory, "") || Allowed(u, ManageUsers, "") {
			t.Errorf("%s may read switchboard history or manage users", u.Username)
		}
	}
	if !Allowed(root, SwitchboardHistory, "") || !Allowed(root, ManageUsers, "") {
		t.Error("admin may not read switchboard history")
	}
}

func TestViewKey(t *testing.T) {
	us := mustUsers(t)
	for name, want := range map[string]string{
		"alice": "u:201", "paula": "", "bob": "u:202,212", "olga": "o:201,203", "root": "",
	} {
		u, _ := us.Lookup(name)
		if got := u.ViewKey(); got != want {
			t.Errorf("%s: view key %q, want %q", name, got, want)
		}
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)} }

func TestTokens(t *testing.T) {
	clk := newClock()
	ts := NewTokens(time.Hour, clk.Now, nil)
	tok, exp, err := ts.Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != 43 || !exp.Equal(clk.Now().Add(time.Hour)) {
		t.Fatalf("token %q expires %v", tok, exp)
	}
	tok2, _, _ := ts.Issue("alice")
	if tok2 == tok {
		t.Fatal("same token twice")
	}
	if u, _, err := ts.Check(tok); err != nil || u != "alice" {
		t.Fatalf("Check = %q, %v", u, err)
	}
	for _, bad := range []string{"", "x", tok[:42], tok + "A", strings.ToUpper(tok)} {
		if _, _, err := ts.Check(bad); !errors.Is(err, ErrTokenUnknown) {
			t.Errorf("Check(%q) = %v", bad, err)
		}
	}
	// The store keeps hashes, never the token itself.
	for h := range ts.m {
		if bytes.Contains(h[:], []byte(tok[:8])) {
			t.Error("token stored in clear")
		}
	}
	if !ts.Revoke(tok2) || ts.Revoke(tok2) {
		t.Error("Revoke")
	}
	if _, _, err := ts.Check(tok2); !errors.Is(err, ErrTokenUnknown) {
		t.Errorf("revoked token: %v", err)
	}
	clk.Add(time.Hour)
	if _, _, err := ts.Check(tok); !errors.Is(err, ErrTokenExpired) {
		t.Errorf("expired token: %v", err)
	}
	if n := len(ts.Sweep(time.Minute)); n != 0 {
		t.Errorf("swept %d tokens within the grace", n)
	}
	clk.Add(2 * time.Minute)
	if n := len(ts.Sweep(time.Minute)); n != 1 || ts.Len() != 0 {
		t.Errorf("swept %d, %d left", n, ts.Len())
	}
	if _, _, err := ts.Check(tok); !errors.Is(err, ErrTokenUnknown) {
		t.Errorf("swept token: %v", err)
	}
	ts.Issue("bob")
	ts.Issue("bob")
	ts.Issue("carl")
	if n := ts.RevokeUser("bob"); n != 2 || ts.Len() != 1 {
		t.Errorf("RevokeUser: %d, %d left", n, ts.Len())
	}
}

func TestTokenCheckDoesNotAllocate(t *testing.T) {
	ts := NewTokens(0, nil, nil)
	tok, _, _ := ts.Issue("alice")
	if n := testing.AllocsPerRun(100, func() { ts.Check(tok) }); n != 0 {
		t.Errorf("Check allocates %v times", n)
	}
}

func TestLimiter(t *testing.T) {
	clk := newClock()
	l := NewLimiter(3, 10*time.Second, clk.Now)
	for i := range 3 {
		if ok, _ := l.Take("k"); !ok {
			t.Fatalf("attempt %d refused", i)
		}
	}
	ok, wait := l.Take("k")
	if ok || wait != 10*time.Second {
		t.Fatalf("4th attempt: %v, wait %v", ok, wait)
	}
	if ok, _ := l.Take("other"); !ok {
		t.Fatal("keys are not independent")
	}
	clk.Add(4 * time.Second)
	if ok, wait := l.Take("k"); ok || wait != 6*time.Second {
		t.Fatalf("after 4 s: %v, wait %v", ok, wait)
	}
	clk.Add(6 * time.Second)
	if ok, _ := l.Take("k"); !ok {
		t.Fatal("not refilled after 10 s")
	}
	clk.Add(time.Minute)
	l.Sweep()
	if l.Len() != 0 {
		t.Errorf("%d buckets left after sweep", l.Len())
	}
}

func TestIPKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1":                "192.0.2.1",
		"192.0.2.1:5555":           "192.0.2.1",
		"[2001:db8::1]:80":         "2001:db8::/64",
		"2001:db8:0:0:ffff::2":     "2001:db8::/64",
		"::ffff:192.0.2.7":         "192.0.2.7",
		"not-an-address":           "not-an-address",
		"[2001:db8:1:2:3::4]:1234": "2001:db8:1:2::/64",
	} {
		if got := ipKey(in); got != want {
			t.Errorf("ipKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestServiceLogin(t *testing.T) {
	clk := newClock()
	s := NewService(mustUsers(t), Config{Now: clk.Now, TokenTTL: time.Hour, UserBurst: 2, UserEvery: time.Minute, IPBurst: 4, IPEvery: time.Second})
	sess, err := s.Login("alice", "secret", "192.0.2.1:1000")
	if err != nil {
		t.Fatal(err)
	}
	if sess.User.Username != "alice" || !sess.ExpiresAt.Equal(clk.Now().Add(time.Hour)) {
		t.Errorf("session %+v", sess)
	}
	u, _, err := s.Authenticate(sess.Token)
	if err != nil || u.Username != "alice" {
		t.Fatalf("Authenticate: %v, %v", u, err)
	}
	s.Logout(sess.Token)
	if _, _, err := s.Authenticate(sess.Token); !errors.Is(err, ErrTokenUnknown) {
		t.Errorf("after logout: %v", err)
	}

	// Wrong password and unknown user look the same.
	if _, err := s.Login("alice", "wrong", "192.0.2.1"); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("wrong password: %v", err)
	}
	if _, err := s.Login("mallory", "secret", "192.0.2.2"); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("unknown user: %v", err)
	}
	// Per (user, address): burst 2, so the third try for alice from one
	// address is refused; another address is not.
	s.Login("alice", "wrong", "192.0.2.3")
	s.Login("alice", "wrong", "192.0.2.3")
	_, err = s.Login("alice", "secret", "192.0.2.3")
	var rl *RateLimitError
	if !errors.As(err, &rl) || rl.By != ByUserAddress || rl.RetryAfterSeconds() < 1 || rl.RetryAfterSeconds() > 60 {
		t.Fatalf("third attempt: %v", err)
	}
	if _, err := s.Login("alice", "secret", "192.0.2.4"); err != nil {
		t.Fatalf("from another address: %v", err)
	}
	// Per address: 192.0.2.1 has spent 2 of 4; two more, then refused.
	s.Login("x", "y", "192.0.2.1")
	s.Login("z", "y", "192.0.2.1:9")
	if _, err := s.Login("bob", "secret", "192.0.2.1"); !errors.As(err, &rl) || rl.By != ByIP {
		t.Fatalf("fifth attempt from one address: %v", err)
	}
	clk.Add(time.Minute)
	if _, err := s.Login("alice", "secret", "192.0.2.1"); err != nil {
		t.Fatalf("after a minute: %v", err)
	}
	s.Sweep()
}

func TestServiceTokenOfRemovedUser(t *testing.T) {
	s := NewService(mustUsers(t), Config{})
	tok, _, _ := s.Tokens().Issue("ghost")
	if _, _, err := s.Authenticate(tok); !errors.Is(err, ErrTokenUnknown) {
		t.Errorf("got %v", err)
	}
}

func TestHashPassword(t *testing.T) {
	h, err := HashPassword("secret", bcrypt.MinCost)
	if err != nil || !checkPassword(h, "secret") || checkPassword(h, "Secret") {
		t.Fatalf("HashPassword: %q, %v", h, err)
	}
	if err := checkHash(h); err != nil {
		t.Errorf("own hash rejected: %v", err)
	}
	if _, err := HashPassword("", 0); !errors.Is(err, ErrEmptyPassword) {
		t.Errorf("empty: %v", err)
	}
	if _, err := HashPassword(strings.Repeat("x", 73), 0); !errors.Is(err, ErrPasswordTooLong) {
		t.Errorf("73 bytes: %v", err)
	}
}
