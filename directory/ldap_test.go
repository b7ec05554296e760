package directory

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/ctibridge/ctibridge/auth"
)

const seedLDIF = `dn: dc=example,dc=com
objectClass: dcObject
objectClass: organization
o: Example
dc: example

dn: ou=people,dc=example,dc=com
objectClass: organizationalUnit
ou: people

dn: ou=groups,dc=example,dc=com
objectClass: organizationalUnit
ou: groups

dn: uid=alice,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
uid: alice
cn: Alice Rossi
sn: Rossi
telephoneNumber: 201
userPassword: alice-pw

dn: uid=bob,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
uid: bob
cn: Bob Verdi
sn: Verdi
telephoneNumber: 202
telephoneNumber: +39 0721 405516
userPassword: bob-pw

dn: uid=carol,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
uid: carol
cn: Carol Bianchi
sn: Bianchi
userPassword: carol-pw

dn: cn=supervisors,ou=groups,dc=example,dc=com
objectClass: groupOfNames
cn: supervisors
member: uid=bob,ou=people,dc=example,dc=com

dn: cn=reception,ou=groups,dc=example,dc=com
objectClass: groupOfNames
cn: reception
member: uid=alice,ou=people,dc=example,dc=com
member: uid=bob,ou=people,dc=example,dc=com
`

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newLDAP(t *testing.T, s *slapd, url string, startTLS bool, clk *testClock) *LDAP {
	t.Helper()
	l, err := NewLDAP(LDAPConfig{URL: url, StartTLS: startTLS, TLS: s.tls, BaseDN: "ou=people,dc=example,dc=com",
		GroupBaseDN: "ou=groups,dc=example,dc=com", GroupProfiles: []GroupProfile{{Group: "supervisors", Profile: "operator"}},
		CacheTTL: time.Hour, Timeout: 2 * time.Second, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLDAPDirectory: users, extensions, groups and profiles come from a
// real slapd over LDAPS and StartTLS; passwords are checked by bind.
// With slapd down, a user who logged in within the cache TTL still can,
// others get ErrDirectoryUnavailable (never an open door), and past the
// TTL everyone does; back up, a user added meanwhile appears at the next
// refresh.
func TestLDAPDirectory(t *testing.T) {
	s := startSlapd(t, seedLDIF)
	clk := &testClock{t: time.Now()}
	for _, c := range []struct {
		name     string
		url      string
		startTLS bool
	}{{"ldaps", s.ldapsURL, false}, {"starttls", s.ldapURL, true}} {
		t.Run(c.name, func(t *testing.T) {
			l := newLDAP(t, s, c.url, c.startTLS, clk)
			us, err := l.Users(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]auth.User{}
			for _, u := range us {
				got[u.Username] = u
			}
			alice, bob, carol := got["alice"], got["bob"], got["carol"]
			if len(us) != 3 || alice.Name != "Alice Rossi" || !slices.Equal(alice.Endpoints, []string{"201"}) ||
				!slices.Equal(alice.Groups, []string{"reception"}) || alice.Profile != "user" || alice.PasswordHash != "" {
				t.Fatalf("alice %+v (of %d)", alice, len(us))
			}
			if !slices.Equal(bob.Endpoints, []string{"202"}) || bob.Profile != "operator" || len(bob.Groups) != 2 || len(carol.Endpoints) != 0 {
				t.Errorf("bob %+v, carol %+v", bob, carol)
			}
			for _, p := range []struct {
				user, pw string
				want     error
			}{{"alice", "alice-pw", nil}, {"alice", "wrong", auth.ErrBadCredentials}, {"alice", "", auth.ErrBadCredentials},
				{"nobody", "x", auth.ErrBadCredentials}, {"carol", "carol-pw", nil}} {
				if err := l.CheckPassword(p.user, p.pw); !errors.Is(err, p.want) && !(err == nil && p.want == nil) {
					t.Errorf("CheckPassword(%s, %q) = %v, want %v", p.user, p.pw, err, p.want)
				}
			}
		})
	}
	if _, err := NewLDAP(LDAPConfig{URL: s.ldapURL, BaseDN: "dc=example,dc=com"}); err == nil {
		t.Error("plain ldap:// without StartTLS accepted")
	}
	// A server that is not the one the certificate names is refused.
	bad, _ := NewLDAP(LDAPConfig{URL: s.ldapsURL, BaseDN: "dc=example,dc=com", Timeout: 2 * time.Second})
	if _, err := bad.Users(context.Background()); err == nil {
		t.Error("a server with an untrusted certificate was accepted")
	}

	// Through the Set and the auth service, down and up again.
	l := newLDAP(t, s, s.ldapsURL, false, clk)
	svc := auth.NewService(nil, auth.Config{Now: clk.Now})
	set := New(svc, nil, []Source{l}, Config{TTL: 2 * time.Hour, Now: clk.Now})
	if err := set.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	sess, err := svc.Login("alice", "alice-pw", "192.0.2.1")
	if err != nil || sess.User.Source != "ldap" || !slices.Equal(sess.User.Scope(), []string{"201"}) {
		t.Fatalf("login alice: %+v, %v", sess.User, err)
	}
	if u, _ := svc.Users().Lookup("bob"); u.Role != auth.RoleOperator || !slices.Equal(u.Scope(), []string{"201", "202"}) {
		t.Errorf("bob, supervisor: %+v", u)
	}
	s.stop()
	if err := set.Refresh(context.Background()); err == nil {
		t.Error("refresh with slapd down: no error")
	}
	if _, err := svc.Login("alice", "alice-pw", "192.0.2.1"); err != nil {
		t.Errorf("alice while down, within the TTL: %v", err)
	}
	if _, err := svc.Login("alice", "wrong", "192.0.2.1"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Errorf("alice, wrong password, while down: %v", err)
	}
	if _, err := svc.Login("bob", "bob-pw", "192.0.2.2"); !errors.Is(err, auth.ErrDirectoryUnavailable) {
		t.Errorf("bob (no cached login) while down: %v, want ErrDirectoryUnavailable", err)
	}
	clk.Add(3 * time.Hour)
	set.Refresh(context.Background())
	if _, err := svc.Login("alice", "alice-pw", "192.0.2.1"); !errors.Is(err, auth.ErrDirectoryUnavailable) {
		t.Errorf("alice past the TTL: %v, want ErrDirectoryUnavailable", err)
	}

	s.start(t)
	addDana(t, s)
	if err := set.Refresh(context.Background()); err != nil {
		t.Fatalf("refresh after restart: %v", err)
	}
	if _, err := svc.Login("dana", "dana-pw", "192.0.2.3"); err != nil {
		t.Errorf("dana, added while down: %v", err)
	}
	if _, err := svc.Login("alice", "alice-pw", "192.0.2.1"); err != nil {
		t.Errorf("alice, directory back: %v", err)
	}
}

func addDana(t *testing.T, s *slapd) {
	t.Helper()
	c, err := ldap.DialURL(s.ldapsURL, ldap.DialWithTLSConfig(s.tls))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Bind("cn=admin,dc=example,dc=com", "admin-pw"); err != nil {
		t.Fatal(err)
	}
	a := ldap.NewAddRequest("uid=dana,ou=people,dc=example,dc=com", nil)
	a.Attribute("objectClass", []string{"inetOrgPerson"})
	a.Attribute("uid", []string{"dana"})
	a.Attribute("cn", []string{"Dana"})
	a.Attribute("sn", []string{"D"})
	a.Attribute("telephoneNumber", []string{"204"})
	a.Attribute("userPassword", []string{"dana-pw"})
	if err := c.Add(a); err != nil {
		t.Fatal(err)
	}
}
