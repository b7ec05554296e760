package directory

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-ldap/ldap/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/ctibridge/ctibridge/auth"
)

// GroupProfile gives the members of a directory group a profile.
type GroupProfile struct {
	Group   string // the group's cn
	Profile string // a profile of the users file (or a default one)
}

// LDAPConfig configures an LDAP or Active Directory source.
type LDAPConfig struct {
	// Name names the source in logs and `users list`. Default "ldap".
	Name string
	// URL is ldaps://host[:636] or ldap://host[:389]; plain ldap:// needs
	// StartTLS: passwords never cross the network in clear.
	URL      string
	StartTLS bool
	// TLS verifies the server (RootCAs for a private CA). Default: the
	// system roots and the URL's host name.
	TLS *tls.Config
	// BindDN and BindPassword are the account that searches users and
	// groups; empty: an anonymous search.
	BindDN, BindPassword string
	// BaseDN is where users are searched (required).
	BaseDN string
	// UserFilter selects users. Default (objectClass=inetOrgPerson); for
	// AD, (&(objectClass=user)(objectCategory=person)).
	UserFilter string
	// UserAttr holds the login name (default uid; AD: sAMAccountName),
	// NameAttr the display name (default cn; AD: displayName), and
	// ExtensionAttr the extension (default telephoneNumber); a value that is
	// not a valid endpoint name is ignored.
	UserAttr, NameAttr, ExtensionAttr string
	// GroupBaseDN is where groups are searched (default BaseDN) with
	// GroupFilter (default (|(objectClass=groupOfNames)(objectClass=group))),
	// their cn the group name and their member attribute the members' DNs.
	GroupBaseDN, GroupFilter string
	// GroupProfiles maps groups to profiles: the first group of the list a
	// user belongs to gives her profile; DefaultProfile (default "user")
	// otherwise.
	GroupProfiles  []GroupProfile
	DefaultProfile string
	// CacheTTL is how long a successful login is remembered (in memory
	// only, as a bcrypt hash) to let the user log in again while the
	// server is down. Default 1 hour; negative: never.
	CacheTTL time.Duration
	// Timeout bounds connecting and each operation. Default 5 s.
	Timeout time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// LDAP is an LDAP or Active Directory source: users by search, passwords
// by bind (never stored). Safe for concurrent use.
type LDAP struct {
	// Immutable after NewLDAP.
	cfg LDAPConfig

	mu    sync.Mutex           // guards dns, creds
	dns   map[string]string    // user name → DN, from the last search
	creds map[string]credCache // user name → last successful login
}

type credCache struct {
	hash []byte
	at   time.Time
}

// NewLDAP checks cfg and returns the source; it does not connect.
func NewLDAP(cfg LDAPConfig) (*LDAP, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "ldap" && u.Scheme != "ldaps") || u.Host == "" {
		return nil, fmt.Errorf("directory: ldap url %q: want ldaps://host[:port] or ldap://host[:port] with StartTLS", cfg.URL)
	}
	if u.Scheme == "ldap" && !cfg.StartTLS {
		return nil, errors.New("directory: ldap:// without StartTLS would send passwords in clear: use ldaps:// or StartTLS")
	}
	if cfg.BaseDN == "" {
		return nil, errors.New("directory: ldap: the base DN is required")
	}
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&cfg.Name, "ldap")
	def(&cfg.UserFilter, "(objectClass=inetOrgPerson)")
	def(&cfg.UserAttr, "uid")
	def(&cfg.NameAttr, "cn")
	def(&cfg.ExtensionAttr, "telephoneNumber")
	def(&cfg.GroupBaseDN, cfg.BaseDN)
	def(&cfg.GroupFilter, "(|(objectClass=groupOfNames)(objectClass=group))")
	def(&cfg.DefaultProfile, "user")
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = time.Hour
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.TLS != nil {
		tc = cfg.TLS.Clone()
	}
	if tc.ServerName == "" {
		tc.ServerName = u.Hostname()
	}
	cfg.TLS = tc
	return &LDAP{cfg: cfg, dns: map[string]string{}, creds: map[string]credCache{}}, nil
}

// Name implements Source.
func (l *LDAP) Name() string { return l.cfg.Name }

// dial connects (and starts TLS) within the timeout.
func (l *LDAP) dial() (*ldap.Conn, error) {
	d := &net.Dialer{Timeout: l.cfg.Timeout}
	c, err := ldap.DialURL(l.cfg.URL, ldap.DialWithDialer(d), ldap.DialWithTLSConfig(l.cfg.TLS))
	if err != nil {
		return nil, err
	}
	c.SetTimeout(l.cfg.Timeout)
	if l.cfg.StartTLS && strings.HasPrefix(l.cfg.URL, "ldap://") {
		if err := c.StartTLS(l.cfg.TLS); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Users implements Source: one search for users, one for groups.
func (l *LDAP) Users(ctx context.Context) ([]auth.User, error) {
	c, err := l.dial()
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer c.Close()
	if l.cfg.BindDN != "" {
		if err := c.Bind(l.cfg.BindDN, l.cfg.BindPassword); err != nil {
			return nil, fmt.Errorf("bind as %s: %w", l.cfg.BindDN, err)
		}
	}
	groups, err := l.groups(c)
	if err != nil {
		return nil, err
	}
	res, err := c.Search(ldap.NewSearchRequest(l.cfg.BaseDN, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 0, 0, false,
		l.cfg.UserFilter, []string{l.cfg.UserAttr, l.cfg.NameAttr, l.cfg.ExtensionAttr}, nil))
	if err != nil {
		return nil, fmt.Errorf("search users: %w", err)
	}
	var out []auth.User
	dns := map[string]string{}
	for _, e := range res.Entries {
		name := e.GetAttributeValue(l.cfg.UserAttr)
		if auth.CheckName(name) != nil || dns[name] != "" {
			continue // no usable login name, or a duplicate: the first wins
		}
		u := auth.User{Username: name, Name: e.GetAttributeValue(l.cfg.NameAttr), Source: l.cfg.Name,
			Checker: l, Groups: groups[strings.ToLower(e.DN)], Profile: l.cfg.DefaultProfile}
		for _, x := range e.GetAttributeValues(l.cfg.ExtensionAttr) {
			if auth.CheckEndpoint(x) == nil {
				u.Endpoints = append(u.Endpoints, x)
			}
		}
		u.Profile = profileOf(l.cfg.GroupProfiles, u.Groups, l.cfg.DefaultProfile)
		dns[name] = e.DN
		out = append(out, u)
	}
	l.mu.Lock()
	l.dns = dns
	l.mu.Unlock()
	return out, nil
}

// groups maps member DNs (lower case) to the names of their groups.
func (l *LDAP) groups(c *ldap.Conn) (map[string][]string, error) {
	res, err := c.Search(ldap.NewSearchRequest(l.cfg.GroupBaseDN, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 0, 0, false,
		l.cfg.GroupFilter, []string{"cn", "member"}, nil))
	if err != nil {
		return nil, fmt.Errorf("search groups: %w", err)
	}
	out := map[string][]string{}
	for _, g := range res.Entries {
		cn := g.GetAttributeValue("cn")
		if auth.CheckName(cn) != nil {
			continue
		}
		for _, m := range g.GetAttributeValues("member") {
			k := strings.ToLower(m)
			out[k] = append(out[k], cn)
		}
	}
	return out, nil
}

// profileOf is the profile of the first group of gps the user belongs to,
// def otherwise.
func profileOf(gps []GroupProfile, groups []string, def string) string {
	for _, gp := range gps {
		for _, g := range groups {
			if strings.EqualFold(g, gp.Group) {
				return gp.Profile
			}
		}
	}
	return def
}

// CheckPassword implements auth.PasswordChecker with a bind as the user.
// While the server cannot be reached, a login matching the user's last
// successful one within CacheTTL passes; otherwise the answer is
// auth.ErrDirectoryUnavailable.
func (l *LDAP) CheckPassword(username, password string) error {
	if password == "" {
		return auth.ErrBadCredentials // an empty simple bind is anonymous: it proves nothing
	}
	l.mu.Lock()
	dn := l.dns[username]
	l.mu.Unlock()
	if dn == "" {
		return auth.ErrBadCredentials
	}
	c, err := l.dial()
	if err == nil {
		err = c.Bind(dn, password)
		c.Close()
		switch {
		case err == nil:
			l.remember(username, password)
			return nil
		case !isUnreachable(err):
			l.forget(username)
			return auth.ErrBadCredentials
		}
	}
	return l.fromCache(username, password)
}

// isUnreachable tells a server that did not answer from one that said no.
func isUnreachable(err error) bool {
	var le *ldap.Error
	if errors.As(err, &le) {
		return le.ResultCode == ldap.ErrorNetwork || le.ResultCode == ldap.LDAPResultUnavailable ||
			le.ResultCode == ldap.LDAPResultBusy || le.ResultCode == ldap.LDAPResultServerDown ||
			le.ResultCode == ldap.LDAPResultTimeout || le.ResultCode == ldap.LDAPResultConnectError
	}
	return true // not an LDAP answer: the connection failed
}

func (l *LDAP) remember(username, password string) {
	if l.cfg.CacheTTL < 0 {
		return
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), auth.DefaultCost)
	if err != nil {
		return
	}
	l.mu.Lock()
	l.creds[username] = credCache{hash: h, at: l.cfg.Now()}
	l.mu.Unlock()
}

func (l *LDAP) forget(username string) {
	l.mu.Lock()
	delete(l.creds, username)
	l.mu.Unlock()
}

func (l *LDAP) fromCache(username, password string) error {
	l.mu.Lock()
	c, ok := l.creds[username]
	l.mu.Unlock()
	if !ok || l.cfg.Now().Sub(c.at) > l.cfg.CacheTTL {
		return auth.ErrDirectoryUnavailable
	}
	if bcrypt.CompareHashAndPassword(c.hash, []byte(password)) != nil {
		return auth.ErrBadCredentials
	}
	return nil
}
