package auth

import "strings"

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
