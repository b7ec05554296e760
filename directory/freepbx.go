package directory

import (
	"context"
	"crypto/sha1"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/ctibridge/ctibridge/auth"
)

// FreePBXConfig configures a FreePBX source.
type FreePBXConfig struct {
	// Name names the source in logs. Default "freepbx".
	Name string
	// DSN is the go-sql-driver/mysql DSN of FreePBX's database, usually
	// "user:pass@unix(/var/run/mysqld/mysqld.sock)/asterisk" (FreePBX's
	// AMPDBUSER/AMPDBPASS from /etc/freepbx.conf, or a read-only grant on
	// userman_users, users and devices).
	DSN string
	// Profile is the profile of FreePBX users in no mapped group. Default
	// "user".
	Profile string
	// GroupProfiles maps User Manager groups (userman_groups) to profiles:
	// the first group of the list a user belongs to gives her profile.
	GroupProfiles []GroupProfile
	// Timeout bounds one refresh. Default 10 s.
	Timeout time.Duration
}

// FreePBX reads users from FreePBX's database, read-only: userman_users
// (login name, display name, password as FreePBX keeps it: an unsalted
// SHA-1, default extension), users (the extension's name), devices (the
// endpoints of the extension) and userman_groups (groups, mapped to
// profiles; optional). A user logs in with her User Manager
// password, checked against the hash read last. Safe for concurrent use.
type FreePBX struct {
	// Immutable after NewFreePBX.
	cfg FreePBXConfig
	db  *sql.DB

	mu     sync.Mutex        // guards hashes
	hashes map[string]string // user name → userman password (SHA-1, hex)
}

// NewFreePBX opens the database handle (it does not connect yet).
func NewFreePBX(cfg FreePBXConfig) (*FreePBX, error) {
	mc, err := mysql.ParseDSN(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("directory: freepbx dsn: %w", err)
	}
	if cfg.Name == "" {
		cfg.Name = "freepbx"
	}
	if cfg.Profile == "" {
		cfg.Profile = "user"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if mc.Timeout == 0 {
		mc.Timeout = cfg.Timeout
	}
	mc.ReadTimeout, mc.WriteTimeout = cfg.Timeout, cfg.Timeout
	mc.Logger = quietLogger{} // every failure is returned, and logged once by Set
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("directory: freepbx: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(2)
	db.SetConnMaxIdleTime(time.Minute)
	return &FreePBX{cfg: cfg, db: db, hashes: map[string]string{}}, nil
}

// Close closes the database handle.
func (f *FreePBX) Close() error { return f.db.Close() }

// Name implements Source.
func (f *FreePBX) Name() string { return f.cfg.Name }

// Users implements Source.
func (f *FreePBX) Users(ctx context.Context) ([]auth.User, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	devices, err := f.devices(ctx)
	if err != nil {
		return nil, err
	}
	groups, err := f.groups(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := f.db.QueryContext(ctx, `SELECT u.id, u.username, COALESCE(u.password, ''), COALESCE(u.default_extension, ''),
		COALESCE(u.displayname, ''), COALESCE(u.fname, ''), COALESCE(u.lname, ''), COALESCE(x.name, '')
		FROM userman_users u LEFT JOIN users x ON x.extension = u.default_extension ORDER BY u.id`)
	if err != nil {
		return nil, fmt.Errorf("read userman_users: %w", err)
	}
	defer rows.Close()
	var out []auth.User
	hashes := map[string]string{}
	for rows.Next() {
		var id int64
		var name, pw, ext, display, first, last, extName string
		if err := rows.Scan(&id, &name, &pw, &ext, &display, &first, &last, &extName); err != nil {
			return nil, fmt.Errorf("read userman_users: %w", err)
		}
		if auth.CheckName(name) != nil || hashes[name] != "" {
			continue
		}
		u := auth.User{Username: name, Name: firstOf(display, strings.TrimSpace(first+" "+last), extName),
			Groups: groups[id], Source: f.cfg.Name, Checker: f}
		u.Profile = profileOf(f.cfg.GroupProfiles, u.Groups, f.cfg.Profile)
		if ext != "" && ext != "none" && auth.CheckEndpoint(ext) == nil {
			// The extension first, its other devices after: the first
			// endpoint is the user's main extension (her presence).
			u.Endpoints = append([]string{ext}, slices.DeleteFunc(slices.Clone(devices[ext]), func(d string) bool { return d == ext })...)
		}
		hashes[name] = strings.ToLower(pw)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read userman_users: %w", err)
	}
	f.mu.Lock()
	f.hashes = hashes
	f.mu.Unlock()
	return out, nil
}

// groups maps User Manager user ids to the names of their groups
// (userman_groups.users is a JSON list of user ids).
func (f *FreePBX) groups(ctx context.Context) (map[int64][]string, error) {
	rows, err := f.db.QueryContext(ctx, `SELECT groupname, COALESCE(users, '[]') FROM userman_groups ORDER BY id`)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1146 {
		return nil, nil // no such table: a FreePBX without User Manager groups
	}
	if err != nil {
		return nil, fmt.Errorf("read userman_groups: %w", err)
	}
	defer rows.Close()
	out := map[int64][]string{}
	for rows.Next() {
		var name string
		var members []byte
		if err := rows.Scan(&name, &members); err != nil {
			return nil, fmt.Errorf("read userman_groups: %w", err)
		}
		var ids []json.Number // FreePBX writes ["1","2"]; numbers are read too
		if auth.CheckName(name) != nil || json.Unmarshal(members, &ids) != nil {
			continue // a group ctibridge cannot name or read gives nothing
		}
		for _, id := range ids {
			if n, err := id.Int64(); err == nil {
				out[n] = append(out[n], name)
			}
		}
	}
	return out, rows.Err()
}

// devices maps each extension to its devices (FreePBX's device and user
// mode: an extension's phones are the devices whose user it is).
func (f *FreePBX) devices(ctx context.Context) (map[string][]string, error) {
	rows, err := f.db.QueryContext(ctx, `SELECT id, COALESCE(user, '') FROM devices ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read devices: %w", err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var id, user string
		if err := rows.Scan(&id, &user); err != nil {
			return nil, fmt.Errorf("read devices: %w", err)
		}
		if auth.CheckEndpoint(id) == nil && user != "" {
			out[user] = append(out[user], id)
		}
	}
	return out, rows.Err()
}

// Names returns the extensions' display names from the users table, for
// the call engine's endpoint names.
func (f *FreePBX) Names(ctx context.Context) (map[string]string, error) {
	rows, err := f.db.QueryContext(ctx, `SELECT extension, COALESCE(name, '') FROM users`)
	if err != nil {
		return nil, fmt.Errorf("read users: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var ext, name string
		if err := rows.Scan(&ext, &name); err != nil {
			return nil, fmt.Errorf("read users: %w", err)
		}
		out[ext] = name
	}
	return out, rows.Err()
}

// CheckPassword implements auth.PasswordChecker against the User Manager
// password read last (an unsalted SHA-1 is how FreePBX keeps it).
func (f *FreePBX) CheckPassword(username, password string) error {
	f.mu.Lock()
	want := f.hashes[username]
	f.mu.Unlock()
	if want == "" || password == "" {
		return auth.ErrBadCredentials
	}
	sum := sha1.Sum([]byte(password))
	if subtle.ConstantTimeCompare([]byte(hex.EncodeToString(sum[:])), []byte(want)) != 1 {
		return auth.ErrBadCredentials
	}
	return nil
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// quietLogger silences the driver's own log lines (to stderr by default).
type quietLogger struct{}

func (quietLogger) Print(...any) {}
