package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/directory"
)

// dirConfig is what serve (and `users list`) read about the directories.
type dirConfig struct {
	ldapURL, ldapCA, ldapBindDN, ldapBindPassword string
	ldapStartTLS                                  bool
	ldapBaseDN, ldapUserFilter                    string
	ldapUserAttr, ldapNameAttr, ldapExtAttr       string
	ldapGroupBaseDN, ldapGroupFilter              string
	ldapGroupProfiles, ldapDefaultProfile         string
	freepbxDB, freepbxProfile                     string
	freepbxGroupProfiles                          string
	refresh, ttl                                  time.Duration
	snapshotDir                                   string // serve's --data-dir: each directory's last users (not a setting)
}

func directorySettings(s *settings, c *dirConfig) {
	s.Str(&c.ldapURL, "ldap-url", "", "LDAP/AD directory of users: ldaps://host[:636], or ldap://host[:389] with --ldap-starttls")
	s.Bool(&c.ldapStartTLS, "ldap-starttls", false, "use StartTLS on an ldap:// URL")
	s.Str(&c.ldapCA, "ldap-ca", "", "PEM file of the CA that signed the LDAP server's certificate (default: the system's)")
	s.Str(&c.ldapBindDN, "ldap-bind-dn", "", "account that searches users and groups (default: anonymous)")
	s.Str(&c.ldapBindPassword, "ldap-bind-password", "", "password of --ldap-bind-dn (prefer the env var or the file)")
	s.Str(&c.ldapBaseDN, "ldap-base-dn", "", "where users are searched (required with --ldap-url)")
	s.Str(&c.ldapUserFilter, "ldap-user-filter", "(objectClass=inetOrgPerson)", "LDAP filter selecting users (AD: (&(objectClass=user)(objectCategory=person)))")
	s.Str(&c.ldapUserAttr, "ldap-user-attr", "uid", "attribute holding the login name (AD: sAMAccountName)")
	s.Str(&c.ldapNameAttr, "ldap-name-attr", "cn", "attribute holding the display name (AD: displayName)")
	s.Str(&c.ldapExtAttr, "ldap-extension-attr", "telephoneNumber", "attribute holding the user's extension")
	s.Str(&c.ldapGroupBaseDN, "ldap-group-base-dn", "", "where groups are searched (default: --ldap-base-dn)")
	s.Str(&c.ldapGroupFilter, "ldap-group-filter", "(|(objectClass=groupOfNames)(objectClass=group))", "LDAP filter selecting groups (cn = name, member = users)")
	s.Str(&c.ldapGroupProfiles, "ldap-group-profiles", "", "group=profile pairs, comma-separated, first match wins (supervisors=operator,it=admin)")
	s.Str(&c.ldapDefaultProfile, "ldap-default-profile", "user", "profile of LDAP users in no mapped group")
	s.Str(&c.freepbxDB, "freepbx-db", "", "FreePBX database of users (MariaDB DSN: user:pass@unix(/var/run/mysqld/mysqld.sock)/asterisk), read-only")
	s.Str(&c.freepbxProfile, "freepbx-profile", "user", "profile of FreePBX users in no mapped group")
	s.Str(&c.freepbxGroupProfiles, "freepbx-group-profiles", "", "User Manager group=profile pairs, comma-separated, first match wins")
	s.Dur(&c.refresh, "directory-refresh", 5*time.Minute, "how often the directories are read again")
	s.Dur(&c.ttl, "directory-ttl", time.Hour, "how long a directory's users may still log in while it is down (then 503)")
}

// sources builds the configured directories; close releases them.
func (c dirConfig) sources() (srcs []directory.Source, closeAll func(), err error) {
	closeAll = func() {}
	if c.ldapURL != "" {
		lc := directory.LDAPConfig{URL: c.ldapURL, StartTLS: c.ldapStartTLS, BindDN: c.ldapBindDN, BindPassword: c.ldapBindPassword,
			BaseDN: c.ldapBaseDN, UserFilter: c.ldapUserFilter, UserAttr: c.ldapUserAttr, NameAttr: c.ldapNameAttr,
			ExtensionAttr: c.ldapExtAttr, GroupBaseDN: c.ldapGroupBaseDN, GroupFilter: c.ldapGroupFilter,
			DefaultProfile: c.ldapDefaultProfile, CacheTTL: c.ttl}
		if lc.GroupProfiles, err = parseGroupProfiles("ldap-group-profiles", c.ldapGroupProfiles); err != nil {
			return nil, closeAll, err
		}
		if c.ldapCA != "" {
			pem, err := os.ReadFile(c.ldapCA)
			if err != nil {
				return nil, closeAll, fmt.Errorf("--ldap-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, closeAll, fmt.Errorf("--ldap-ca: %s holds no PEM certificate", c.ldapCA)
			}
			lc.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		l, err := directory.NewLDAP(lc)
		if err != nil {
			return nil, closeAll, fmt.Errorf("--ldap-url: %w", err)
		}
		srcs = append(srcs, l)
	}
	if c.freepbxDB != "" {
		gps, err := parseGroupProfiles("freepbx-group-profiles", c.freepbxGroupProfiles)
		if err != nil {
			return nil, closeAll, err
		}
		f, err := directory.NewFreePBX(directory.FreePBXConfig{DSN: c.freepbxDB, Profile: c.freepbxProfile, GroupProfiles: gps})
		if err != nil {
			return nil, closeAll, fmt.Errorf("--freepbx-db: %w", err)
		}
		srcs = append(srcs, f)
		closeAll = func() { f.Close() }
	}
	return srcs, closeAll, nil
}

// parseGroupProfiles parses the setting name's "group=profile,group=profile".
func parseGroupProfiles(name, s string) ([]directory.GroupProfile, error) {
	var out []directory.GroupProfile
	for _, f := range splitList(s) {
		g, p, ok := strings.Cut(f, "=")
		g, p = strings.TrimSpace(g), strings.TrimSpace(p)
		if !ok || g == "" || p == "" {
			return nil, fmt.Errorf("--%s: %q: want group=profile", name, f)
		}
		out = append(out, directory.GroupProfile{Group: g, Profile: p})
	}
	return out, nil
}

// checkProfiles reports group profiles the users file does not define.
func (c dirConfig) checkProfiles(users *auth.Users) error {
	profiles := users.Profiles()
	names := []string{c.ldapDefaultProfile, c.freepbxProfile}
	for _, set := range [][2]string{{"ldap-group-profiles", c.ldapGroupProfiles}, {"freepbx-group-profiles", c.freepbxGroupProfiles}} {
		gps, err := parseGroupProfiles(set[0], set[1])
		if err != nil {
			return err
		}
		for _, gp := range gps {
			names = append(names, gp.Profile)
		}
	}
	for _, n := range names {
		if _, ok := profiles[n]; !ok {
			return fmt.Errorf("directory profile %q is not defined (known: %s)", n, strings.Join(auth.ProfileNames(profiles), ", "))
		}
	}
	return nil
}

// openDirectories builds the directory set over authSvc and reads every
// source once; a source that cannot be read is logged, and its users are
// known from its snapshot in c.snapshotDir if any (their logins answer
// 503 until it can be read). It returns nil when no directory is
// configured.
func openDirectories(ctx context.Context, c dirConfig, authSvc *auth.Service, users *auth.Users, log *slog.Logger) (*directory.Set, func(), error) {
	srcs, closeAll, err := c.sources()
	if err != nil || len(srcs) == 0 {
		return nil, closeAll, err
	}
	if err := c.checkProfiles(users); err != nil {
		closeAll()
		return nil, func() {}, err
	}
	set := directory.New(authSvc, users, srcs, directory.Config{Refresh: c.refresh, TTL: c.ttl, SnapshotDir: c.snapshotDir, Log: log})
	if err := set.Refresh(ctx); err != nil {
		log.Warn("directory not read at start: its users cannot log in until it is (503), retrying", "err", err)
	}
	for _, st := range set.Status() {
		log.Info("directory", "source", st.Name, "users", st.Users, "from_snapshot", st.Snapshot)
	}
	return set, closeAll, nil
}
