// Package directory brings users from outside the users file: LDAP or
// Active Directory (users by search, extensions from an attribute, groups
// mapped to profiles, passwords checked by bind over LDAPS or StartTLS and
// never stored) and FreePBX (users, extensions and display names read-only
// from its MariaDB tables userman_users, users and devices, groups from
// userman_groups mapped to profiles; logins checked against User
// Manager's password hash). A Set merges the users file with the
// sources into the one auth.Users the service uses, refreshes it
// periodically, and keeps a source's users while it is down: logins go on
// for a user who logged in within the cache TTL, others get
// auth.ErrDirectoryUnavailable (503), never an open door.
//
// It does not write to any directory, and it does not cache users on
// disk: after a restart with a directory down, its users cannot log in
// until it is back (their sessions, stored by auth, go on).
//
// Concurrency: Set, LDAP and FreePBX are safe for concurrent use; Set.Run
// owns the periodic refresh.
package directory
