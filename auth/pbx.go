package auth

import (
	"cmp"
	"slices"
	"strings"

	"github.com/ctibridge/ctibridge/calls"
)

// ForPBX is u as one named PBX sees it, when several PBXs are followed
// (docs/operations.md "Several PBXs"): a named PBX's ids are qualified
// ("site2:201") in the combined state and in the users file, but its own
// engine and its AMI actions use them bare. The copy owns, and may act
// on, only the endpoints that start with prefix ("site2:"), prefix
// removed; its capabilities and permissions are u's. An admin stays an
// admin.
func (u *User) ForPBX(prefix string) *User {
	c := *u
	c.Endpoints = nil
	for _, e := range u.Endpoints {
		if local, ok := strings.CutPrefix(e, prefix); ok {
			c.Endpoints = append(c.Endpoints, local)
		}
	}
	c.own, c.scope = localSet(u.own, prefix), localSet(u.scope, prefix)
	return &c
}

func localSet(m map[string]bool, prefix string) map[string]bool {
	out := make(map[string]bool)
	for e, ok := range m {
		if local, has := strings.CutPrefix(e, prefix); has && ok {
			out[local] = true
		}
	}
	return out
}

// checkPBX accepts a PBX name in a user's pbxs: a named PBX's name, or
// calls.DefaultPBXName.
func checkPBX(name string) error {
	if name == calls.DefaultPBXName {
		return nil
	}
	return calls.CheckPBXName(name)
}

// PBXLimited reports whether the user sees only some PBXs (User.PBXs).
func (u *User) PBXLimited() bool { return u != nil && len(u.PBXs) > 0 }

// PBXKey names the PBXs the user is limited to (User.PBXs, joined by
// ","; "" for all): users with equal keys see the same PBXs, so reads of
// some PBXs are cached by it. Made once, by NewUsers.
func (u *User) PBXKey() string {
	if u == nil {
		return ""
	}
	return u.pbxKey
}

// SeesPBX reports whether the user sees PBX name ("" or
// calls.DefaultPBXName: the PBX of --ami).
func (u *User) SeesPBX(name string) bool {
	if !u.PBXLimited() {
		return true
	}
	return slices.Contains(u.PBXs, cmp.Or(name, calls.DefaultPBXName))
}

// SeesID reports whether the user sees the PBX of a combined id
// ("site2:201" is site2's, "201" the default PBX's).
func (u *User) SeesID(id string) bool {
	if !u.PBXLimited() {
		return true
	}
	pbx, _ := calls.SplitID(id, func(n string) bool { return calls.CheckPBXName(n) == nil })
	return u.SeesPBX(pbx)
}
