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
// A source that failed its last read is read again every Config.Retry
// (2 s), not at the next refresh. It does not write to any directory.
// With Config.SnapshotDir, each good read is kept on disk without any
// password or hash (snapshot.go): after a restart with a directory down,
// its users are known from there, their sessions go on and their logins
// answer auth.ErrDirectoryUnavailable (503) until it is back.
//
// Concurrency: Set, LDAP and FreePBX are safe for concurrent use; Set.Run
// owns the periodic refresh.
package directory
