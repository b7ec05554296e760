package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
)

// TestOpenDirectories: serve's wiring of the directories. No directory:
// nil. A directory that does not answer: serve starts, logs it, and the
// status says why. A profile nobody defined, or a plain ldap:// URL:
// refused at start, naming the setting.
func TestOpenDirectories(t *testing.T) {
	ctx := context.Background()
	users, _ := auth.NewUsers(nil)
	svc := auth.NewService(users, auth.Config{})
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	base := dirConfig{ldapUserFilter: "(objectClass=inetOrgPerson)", ldapDefaultProfile: "user", freepbxProfile: "user",
		refresh: time.Minute, ttl: time.Hour}
	if set, closeAll, err := openDirectories(ctx, base, svc, users, log); set != nil || err != nil {
		t.Fatalf("no directory: %v, %v", set, err)
	} else {
		closeAll()
	}

	down := base
	down.ldapURL, down.ldapBaseDN = "ldaps://127.0.0.1:1", "dc=example,dc=com"
	set, closeAll, err := openDirectories(ctx, down, svc, users, log)
	if err != nil || set == nil {
		t.Fatalf("directory down at start: %v, %v", set, err)
	}
	closeAll()
	if st := set.Status(); len(st) != 1 || st[0].Err == nil || !strings.Contains(logs.String(), "directory not read at start") {
		t.Errorf("status %+v; logs %s", st, logs.String())
	}

	for _, c := range []struct {
		mod  func(*dirConfig)
		want string
	}{
		{func(c *dirConfig) { c.ldapGroupProfiles = "supervisors=boss" }, `directory profile "boss" is not defined`},
		{func(c *dirConfig) { c.ldapGroupProfiles = "supervisors" }, "want group=profile"},
		{func(c *dirConfig) { c.ldapURL = "ldap://127.0.0.1:1" }, "without StartTLS"},
		{func(c *dirConfig) { c.ldapCA = "/nonexistent.pem" }, "--ldap-ca"},
		{func(c *dirConfig) { c.freepbxDB = "not a dsn" }, "--freepbx-db"},
		{func(c *dirConfig) { c.freepbxDB, c.freepbxGroupProfiles = "u@unix(/x)/asterisk", "x=ghost" }, `directory profile "ghost"`},
	} {
		cfg := down
		c.mod(&cfg)
		if _, closeAll, err := openDirectories(ctx, cfg, svc, users, log); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		} else {
			closeAll()
		}
	}
}
