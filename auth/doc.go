// Package auth holds who may use ctibridge and what each one may see and do:
// the users file (YAML, bcrypt password hashes, roles or profiles of
// capabilities, owned endpoints, groups, extra permissions: users.go,
// profile.go; users added from a CSV, the file checked as it would load:
// usersimport.go), sessions (256-bit random access and refresh tokens kept
// only as SHA-256 hashes, expiring, revoked on logout, by an admin or when
// a reload changes or removes the user; kept across restarts through a
// SessionStore: token.go, sessions.go, the SQL one in auth/authdb; shared
// by every node of a deployment through a SharedSessions, the PostgreSQL
// one, whose changes each node hears: shared.go), the
// login limits (per client address, per user and address, and per name
// across addresses a shared growing delay and a budget of failures, which
// never lock out a user's known address: guard.go; one budget for all the
// nodes sharing sessions: sharedfail.go),
// and the permission model (docs/design.md, "Users and permissions").
//
// Every permission question goes through one function, Allowed(user,
// action, endpoint), driven by the user's capabilities; what a user sees
// of the live state is decided by View, built from the same rules: the
// visibility class of each entity (calls.Class: Full, or NumbersHidden,
// which blanks the numbers and names a user may not see and shows channel
// names and conversation ids by opaque names), the extensions it sees in
// full and the conference members it sees. The calls engine encodes each
// class; auth only decides which one a user gets, and supplies the opaque
// names (Opaquer, set as calls.Config.Opaque; OpaqueChannel, OpaqueConvID:
// a keyed hash, random key per process, which actions accept back). REST
// and the WebSocket hub both ask View, so they filter identically. The
// hub learns of revocations through Service.OnRevoke.
//
// Several PBXs (pbx.go): endpoints of a named PBX are written "site2:201";
// User.PBXs limits a user to some PBXs (SeesPBX, SeesID; PBXKey names the
// set, for caches of what it sees); ForPBX is the user with one PBX's bare
// ids, to plan that PBX's actions. PBX names and ids are calls'
// (calls.CheckPBXName, calls.SplitID).
//
// The package knows nothing of HTTP: it does not import net/http. Callers
// translate its errors (ErrBadCredentials, *RateLimitError, ErrTokenUnknown,
// ErrTokenExpired) into statuses or close codes.
//
// Concurrency: a Users value is immutable once parsed and safe to share.
// Service, Tokens, FileSessions and Limiter are safe for concurrent use;
// OnRevoke callbacks run on the revoking goroutine, outside any lock.
package auth
