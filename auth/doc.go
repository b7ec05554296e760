// Package auth holds who may use ctibridge and what each one may see and do:
// the users file (YAML, bcrypt password hashes, roles, owned endpoints,
// groups, extra permissions), bearer tokens (256-bit random, kept only as
// SHA-256 hashes, expiring, revoked on logout), the login rate limit (per
// user and per client address), and the permission model (docs/design.md,
// "Users and permissions").
//
// Every permission question goes through one function, Allowed(user,
// action, endpoint); what a user sees of the live state is decided by
// View, built from the same rules: it blanks the numbers and names a user
// may not see and shows channel names and conversation ids by opaque
// names (OpaqueChannel, OpaqueConvID: a keyed hash, random key per
// process). REST and the WebSocket hub both use them, so they filter
// identically.
//
// The package knows nothing of HTTP: it does not import net/http. Callers
// translate its errors (ErrBadCredentials, *RateLimitError, ErrTokenUnknown,
// ErrTokenExpired) into statuses or close codes.
//
// Concurrency: a Users value is immutable once parsed and safe to share.
// Service, Tokens and Limiter are safe for concurrent use.
package auth
