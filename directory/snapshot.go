package directory

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ctibridge/ctibridge/auth"
)

// snapshot is a source's users as last read, kept in
// <SnapshotDir>/directory-<source>.json (mode 0600): names, display names,
// extensions, groups and profiles, never a password or its hash. After a
// restart with the source down its users are known from it: their logins
// answer auth.ErrDirectoryUnavailable (503), not a wrong password, and
// their stored sessions go on.
type snapshot struct {
	At    time.Time      `json:"at"`
	Users []snapshotUser `json:"users"`
}

type snapshotUser struct {
	Username    string   `json:"username"`
	Name        string   `json:"name,omitempty"`
	Role        uint8    `json:"role,omitempty"`
	Profile     string   `json:"profile,omitempty"`
	Endpoints   []string `json:"endpoints,omitempty"`
	Groups      []string `json:"groups,omitempty"`
	Permissions []string `json:"permissions,omitempty"`
	Cellphone   string   `json:"cellphone,omitempty"`
	PBXs        []string `json:"pbxs,omitempty"`
}

func (s *Set) snapshotPath(source string) string {
	return filepath.Join(s.cfg.SnapshotDir, "directory-"+source+".json")
}

// saveSnapshot writes source's users read at at (temporary file, then
// rename).
func (s *Set) saveSnapshot(source string, users []auth.User, at time.Time) error {
	snap := snapshot{At: at, Users: make([]snapshotUser, 0, len(users))}
	for _, u := range users {
		snap.Users = append(snap.Users, snapshotUser{Username: u.Username, Name: u.Name, Role: uint8(u.Role), Profile: u.Profile,
			Endpoints: u.Endpoints, Groups: u.Groups, Permissions: u.Permissions, Cellphone: u.Cellphone, PBXs: u.PBXs})
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.cfg.SnapshotDir, ".directory-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), s.snapshotPath(source))
}

// loadSnapshot reads source's last snapshot: its users, whose passwords
// cannot be checked (auth.ErrDirectoryUnavailable) until the source
// answers, and when they were read. No snapshot is no error (nil users).
func (s *Set) loadSnapshot(source string) ([]auth.User, time.Time, error) {
	b, err := os.ReadFile(s.snapshotPath(source))
	if errors.Is(err, os.ErrNotExist) {
		return nil, time.Time{}, nil
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	var snap snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return nil, time.Time{}, fmt.Errorf("%s: %w", s.snapshotPath(source), err)
	}
	out := make([]auth.User, 0, len(snap.Users))
	for _, u := range snap.Users {
		out = append(out, auth.User{Username: u.Username, Name: u.Name, Role: auth.Role(u.Role), Profile: u.Profile,
			Endpoints: u.Endpoints, Groups: u.Groups, Permissions: u.Permissions, Cellphone: u.Cellphone, PBXs: u.PBXs,
			Source: source, Checker: unavailable{}})
	}
	return out, snap.At, nil
}
