package auth

import (
	"slices"
	"strings"
	"testing"
)

// TestProfilesFromUsersFile: a users file names profiles of capabilities
// and gives them to users; the roles stay as the default profiles, so old
// files mean what they meant.
func TestProfilesFromUsersFile(t *testing.T) {
	h := testHash()
	us, err := ParseUsers("users.yaml", []byte(`profiles:
  receptionist: [call, hangup_own, transfer, park, pickup, see_numbers, see_unowned, history_personal, phonebook_write]
  supervisor: [call, spy, intrude, record_any, queue_manager, group_scope, see_numbers, history_group]
  private: [call]
users:
  - username: rita
    password_hash: "`+h+`"
    profile: receptionist
    endpoints: ["201"]
  - username: sue
    password_hash: "`+h+`"
    profile: supervisor
    endpoints: ["202"]
    groups: [sales]
  - username: sal
    password_hash: "`+h+`"
    endpoints: ["203"]
    groups: [sales]
  - username: pia
    password_hash: "`+h+`"
    profile: private
    endpoints: ["204"]
    permissions: [switchboard_history]
`))
	if err != nil {
		t.Fatal(err)
	}
	get := func(n string) *User { u, _ := us.Lookup(n); return u }
	rita, sue, sal, pia := get("rita"), get("sue"), get("sal"), get("pia")
	for _, c := range []struct {
		u        *User
		a        Action
		endpoint string
		want     bool
	}{
		{rita, PickupParking, "201", true}, // pickup + see_unowned
		{rita, Spy, "201", false},
		{rita, SeeCalls, "", true},
		{rita, PhonebookWrite, "", true},
		{sue, Spy, "203", true}, // group scope: sal's phone
		{sue, Spy, "201", false},
		{sue, Record, "201", true}, // record_any
		{sue, QueueMembership, "999", true},
		{sue, Hangup, "202", false},
		{sue, GroupHistory, "", true},
		{sal, Spy, "203", true}, // the "user" profile as before
		{sal, Spy, "202", false},
		{sal, PhonebookWrite, "", false},
		{pia, Call, "204", true},
		{pia, SeeCalls, "204", false}, // privacy: not even her own calls' numbers
		{pia, SwitchboardHistory, "", true},
	} {
		if got := Allowed(c.u, c.a, c.endpoint); got != c.want {
			t.Errorf("Allowed(%s, %s, %q) = %v, want %v", c.u.Username, c.a, c.endpoint, got, c.want)
		}
	}
	if sue.Role != RoleOperator || rita.Role != RoleUser || sal.Profile != "" {
		t.Errorf("roles: sue %v, rita %v", sue.Role, rita.Role)
	}
	if !slices.Contains(pia.Caps().Names(), "history_switchboard") || pia.ViewKey() != "pu:" {
		t.Errorf("pia: caps %v, view key %q", pia.Caps().Names(), pia.ViewKey())
	}
	if got := us.Profiles(); len(got) != 6 {
		t.Errorf("profiles %v", ProfileNames(got))
	}
}

func TestProfileErrors(t *testing.T) {
	h := testHash()
	for _, c := range []struct{ file, want string }{
		{"profiles:\n  x: [fly]\nusers:\n", `profile "x": unknown capability "fly"`},
		{"profiles: [call]\nusers:\n", "want a mapping of profile name"},
		{"users:\n  - username: a\n    password_hash: \"" + h + "\"\n    profile: ghost\n", `unknown profile "ghost" (known: admin, operator, user)`},
		{"users:\n  - username: a\n    password_hash: \"" + h + "\"\n    role: admin\n    profile: user\n", "give a role or a profile, not both"},
		{"profiles:\n  x: [call]\n  x: [park]\nusers:\n", "given twice"},
	} {
		_, err := ParseUsers("u.yaml", []byte(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.file, err, c.want)
		}
	}
	if _, err := NewUsersWithProfiles([]User{{Username: "a", PasswordHash: h, Profile: "ghost"}}, nil); err == nil {
		t.Error("NewUsersWithProfiles took an unknown profile")
	}
}

// TestDefaultProfilesMatchRoles: every capability is in the admin profile,
// and the operator's is the user's plus group scope and unowned calls.
func TestDefaultProfilesMatchRoles(t *testing.T) {
	p := DefaultProfiles()
	for _, c := range AllCapabilities() {
		if !p["admin"].Has(c) {
			t.Errorf("admin lacks %s", c)
		}
	}
	if p["operator"] != p["user"]|CapsOf(CapGroupScope, CapSeeUnowned) {
		t.Errorf("operator %v", p["operator"].Names())
	}
}
