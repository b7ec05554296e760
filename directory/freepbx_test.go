package directory

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ctibridge/ctibridge/auth"
)

// freepbxSchema is the part of FreePBX's asterisk database the source
// reads, with FreePBX's column names and types.
var freepbxSchema = []string{
	`CREATE TABLE userman_users (id int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY, auth varchar(150) DEFAULT 'freepbx',
		authid varchar(750), username varchar(150), description text, password varchar(255),
		default_extension varchar(45) NOT NULL DEFAULT 'none', primary_group int(11), permissions blob,
		fname varchar(100), lname varchar(100), displayname varchar(200), title varchar(100), company varchar(100),
		department varchar(100), email text, cell varchar(100), work varchar(100), home varchar(100), fax varchar(100))`,
	`CREATE TABLE users (extension varchar(20) NOT NULL DEFAULT '' PRIMARY KEY, password varchar(20), name varchar(50),
		voicemail varchar(50), ringtimer int(3), noanswer varchar(100), recording varchar(50), outboundcid varchar(50),
		sipname varchar(50), mohclass varchar(80) DEFAULT 'default')`,
	`CREATE TABLE devices (id varchar(20) NOT NULL DEFAULT '' PRIMARY KEY, tech varchar(10), dial varchar(255),
		devicetype varchar(5), user varchar(50), description varchar(50), emergency_cid varchar(100))`,
	`CREATE TABLE userman_groups (id int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY, groupname varchar(150),
		description varchar(255), language varchar(100), timezone varchar(100), users longblob, permissions blob)`,
	`INSERT INTO userman_groups (groupname, users) VALUES ('All_Users', '["1","2","3"]'), ('supervisors', '["2"]'),
		('bad group', '["1"]'), ('broken', 'not json')`,
	`INSERT INTO users (extension, name) VALUES ('201', 'Reception'), ('202', 'Mario Rossi'), ('203', 'Sales')`,
	`INSERT INTO devices (id, tech, dial, devicetype, user, description) VALUES
		('201', 'pjsip', 'PJSIP/201', 'fixed', '201', 'Reception'), ('202', 'pjsip', 'PJSIP/202', 'fixed', '202', 'Mario'),
		('99202', 'pjsip', 'PJSIP/99202', 'fixed', '202', 'Mario softphone'), ('1202', 'pjsip', 'PJSIP/1202', 'fixed', '202', 'Mario desk 2'), ('203', 'pjsip', 'PJSIP/203', 'fixed', '203', 'Sales')`,
	`INSERT INTO userman_users (username, password, default_extension, displayname, fname, lname) VALUES
		('reception', SHA1('rec-pw'), '201', NULL, 'Front', 'Desk'),
		('mario', SHA1('mario-pw'), '202', 'Mario Rossi', NULL, NULL),
		('nophone', SHA1('np-pw'), 'none', NULL, NULL, NULL),
		('bad name', SHA1('x'), '203', NULL, NULL, NULL)`,
}

// TestFreePBXDirectory: users, extensions (devices included) and display
// names come from a real MariaDB with FreePBX's tables; logins check the
// User Manager password; with the database down the users read last stay
// until the TTL, then logins answer ErrDirectoryUnavailable.
func TestFreePBXDirectory(t *testing.T) {
	m := startMariaDB(t)
	m.exec(t, "", "CREATE DATABASE asterisk")
	m.exec(t, "asterisk", freepbxSchema...)
	f, err := NewFreePBX(FreePBXConfig{DSN: m.dsn("asterisk"), Timeout: 2 * time.Second,
		GroupProfiles: []GroupProfile{{Group: "supervisors", Profile: "operator"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	us, err := f.Users(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]auth.User{}
	for _, u := range us {
		got[u.Username] = u
	}
	if len(us) != 3 || got["reception"].Name != "Front Desk" || !slices.Equal(got["reception"].Endpoints, []string{"201"}) ||
		got["mario"].Name != "Mario Rossi" || !slices.Equal(got["mario"].Endpoints, []string{"202", "1202", "99202"}) ||
		len(got["nophone"].Endpoints) != 0 || got["mario"].PasswordHash != "" {
		t.Fatalf("users %+v", us)
	}
	if got["mario"].Profile != "operator" || !slices.Equal(got["mario"].Groups, []string{"All_Users", "supervisors"}) ||
		got["reception"].Profile != "user" || !slices.Equal(got["reception"].Groups, []string{"All_Users"}) {
		t.Errorf("groups and profiles: mario %+v, reception %+v", got["mario"], got["reception"])
	}
	names, err := f.Names(context.Background())
	if err != nil || names["203"] != "Sales" {
		t.Errorf("names %v, %v", names, err)
	}

	clk := &testClock{t: time.Now()}
	svc := auth.NewService(nil, auth.Config{Now: clk.Now})
	set := New(svc, nil, []Source{f}, Config{TTL: time.Hour, Now: clk.Now})
	if err := set.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Login("mario", "mario-pw", "192.0.2.1"); err != nil {
		t.Fatalf("mario: %v", err)
	}
	if _, err := svc.Login("mario", "wrong", "192.0.2.1"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Errorf("wrong password: %v", err)
	}
	m.exec(t, "asterisk", `UPDATE userman_users SET password = SHA1('new-pw') WHERE username = 'mario'`)
	set.Refresh(context.Background())
	if _, err := svc.Login("mario", "mario-pw", "192.0.2.1"); !errors.Is(err, auth.ErrBadCredentials) {
		t.Errorf("old password after a change in FreePBX: %v", err)
	}
	m.stop()
	if err := set.Refresh(context.Background()); err == nil {
		t.Error("refresh with MariaDB down: no error")
	}
	if _, err := svc.Login("mario", "new-pw", "192.0.2.1"); err != nil {
		t.Errorf("mario while the database is down, within the TTL: %v", err)
	}
	clk.Add(2 * time.Hour)
	set.Refresh(context.Background())
	if _, err := svc.Login("mario", "new-pw", "192.0.2.1"); !errors.Is(err, auth.ErrDirectoryUnavailable) {
		t.Errorf("past the TTL: %v, want ErrDirectoryUnavailable", err)
	}
	if st := set.Status(); len(st) != 1 || st[0].Err == nil || st[0].Users != 3 {
		t.Errorf("status %+v", st)
	}
}
