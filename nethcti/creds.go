package nethcti

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"

	"github.com/ctibridge/ctibridge/auth"
)

// The credentials the clients carry, and what stands behind each:
//   - a login JWT (POST /api/login): the login session of the native login
//     (auth.Service.Login), whose access token the JWT holds sealed, so
//     the session's expiry, revocation and a restart are the native ones;
//   - a legacy token (nonce login, Authorization: user:token): the same,
//     the token mapped to its session in memory (as nethcti-server keeps
//     them: they end with the process);
//   - a persistent token (a JWT of an audience, or a legacy token of
//     phone_island_token_login or an auth-exp: no-exp login): a row of the
//     Store, its SHA-256 only; it ends when deleted or when its user
//     leaves the users set, and its user's current grants apply.
// Every request asks auth for the user again: a changed profile counts at
// once, a revoked session at its next request.

// Identity is whom a NethCTI credential stands for.
type Identity struct {
	User *auth.User
	// Session is the native access token behind the credential:
	// auth.Service.OnRevoke(Session, f) tells when it ends (a socket then
	// closes). "" for a persistent token, which no login session backs.
	Session string
	// Audience is a persistent token's audience ("phone-island", ...;
	// "legacy:..." for one of the legacy scheme), "" otherwise.
	Audience string
}

// Errors of the credential checks (all answered 401 except
// errNotLoaded, 503).
var (
	ErrBadToken  = errors.New("nethcti: unknown, revoked or expired token")
	errNotLoaded = errors.New("nethcti: persistent tokens are still being read")
)

// jwtCacheMax bounds the verified-JWT cache (cleared whole when full).
const jwtCacheMax = 4096

// creds holds the in-memory side of the credentials. Safe for concurrent
// use.
type creds struct {
	mu         sync.RWMutex
	jwts       map[string]jwtEntry // verified JWTs: what they resolve to
	legacy     map[[32]byte]legacyEntry
	persistent map[[32]byte]TokenRecord
	byAudience map[[2]string][32]byte // (username, audience) → hash
	loaded     bool
}

type jwtEntry struct {
	username string
	session  string // the sealed session, opened; "" for a persistent JWT
	audience string
	hash     [32]byte // a persistent JWT's
}

type legacyEntry struct {
	as       string // the name the client logs in with (a user name or main extension)
	username string
	session  string
}

func newCreds() *creds {
	return &creds{jwts: map[string]jwtEntry{}, legacy: map[[32]byte]legacyEntry{},
		persistent: map[[32]byte]TokenRecord{}, byAudience: map[[2]string][32]byte{}}
}

func hashOf(tok string) [32]byte { return sha256.Sum256([]byte(tok)) }

// load reads the stored persistent tokens (at start; again until it works).
func (f *Front) loadTokens(ctx context.Context) error {
	recs, err := f.store.Tokens(ctx)
	if err != nil && recs == nil {
		return err
	}
	c := f.creds
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range recs {
		k := [2]string{r.Username, r.Audience}
		if _, held := c.byAudience[k]; held {
			continue // made here since: newer
		}
		c.persistent[r.Hash], c.byAudience[k] = r, r.Hash
	}
	c.loaded = true
	return err
}

// Authenticate checks an Authorization header as its prefix takes it:
// "Bearer <JWT>" under /api, "<user>:<token>" under /webrest.
func (f *Front) authenticateHeader(h string, legacy bool) (Identity, error) {
	if legacy {
		user, tok, ok := strings.Cut(h, ":")
		if !ok || user == "" || tok == "" {
			return Identity{}, ErrBadToken
		}
		return f.CheckLegacy(user, tok)
	}
	const p = "Bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return Identity{}, ErrBadToken
	}
	return f.CheckJWT(strings.TrimSpace(h[len(p):]))
}

// CheckToken checks the credential of a socket login ({accessKeyId,
// token}): a JWT, or a legacy token of user accessKeyId. For a JWT,
// username may be "" or must be the token's user.
func (f *Front) CheckToken(username, token string) (Identity, error) {
	if strings.Count(token, ".") == 2 {
		id, err := f.CheckJWT(token)
		if err == nil && username != "" && username != id.User.Username && f.Username(username) != id.User.Username {
			return Identity{}, ErrBadToken
		}
		return id, err
	}
	return f.CheckLegacy(username, token)
}

// CheckJWT checks a JWT of the front (a login's or a persistent one).
func (f *Front) CheckJWT(tok string) (Identity, error) {
	c := f.creds
	c.mu.RLock()
	e, ok := c.jwts[tok]
	c.mu.RUnlock()
	if !ok {
		cl, err := f.keys.verify(tok, f.now())
		if err != nil {
			return Identity{}, ErrBadToken
		}
		e = jwtEntry{username: cl.ID}
		switch {
		case cl.Session != "":
			if e.session, err = f.keys.openText(cl.Session); err != nil {
				return Identity{}, ErrBadToken
			}
		case cl.Audience != "":
			e.audience, e.hash = cl.Audience, hashOf(tok)
		default:
			return Identity{}, ErrBadToken
		}
		c.mu.Lock()
		if len(c.jwts) >= jwtCacheMax {
			clear(c.jwts)
		}
		c.jwts[tok] = e
		c.mu.Unlock()
	}
	if e.session != "" {
		return f.sessionIdentity(e.session)
	}
	return f.persistentIdentity(e.hash, e.username)
}

// CheckLegacy checks a legacy token of user (a user name, or the main
// extension the user logged in with).
func (f *Front) CheckLegacy(user, tok string) (Identity, error) {
	h := hashOf(tok)
	c := f.creds
	c.mu.RLock()
	e, ok := c.legacy[h]
	c.mu.RUnlock()
	if ok {
		if e.as != user && e.username != user {
			return Identity{}, ErrBadToken
		}
		id, err := f.sessionIdentity(e.session)
		if errors.Is(err, ErrBadToken) {
			c.mu.Lock()
			delete(c.legacy, h) // its session has ended
			c.mu.Unlock()
		}
		return id, err
	}
	return f.persistentIdentity(h, user)
}

func (f *Front) sessionIdentity(session string) (Identity, error) {
	u, _, err := f.auth.Authenticate(session)
	if err != nil {
		if errors.Is(err, auth.ErrSessionsLoading) {
			return Identity{}, err
		}
		return Identity{}, ErrBadToken
	}
	return Identity{User: u, Session: session}, nil
}

// persistentIdentity checks a persistent token's hash, held for user (its
// user name or main extension).
func (f *Front) persistentIdentity(h [32]byte, user string) (Identity, error) {
	c := f.creds
	c.mu.RLock()
	r, ok := c.persistent[h]
	loaded := c.loaded
	c.mu.RUnlock()
	if !ok {
		if !loaded {
			return Identity{}, errNotLoaded
		}
		return Identity{}, ErrBadToken
	}
	if user != r.Username && f.Username(user) != r.Username {
		return Identity{}, ErrBadToken
	}
	u, ok := f.auth.Users().Lookup(r.Username)
	if !ok {
		return Identity{}, ErrBadToken
	}
	return Identity{User: u, Audience: r.Audience}, nil
}

// legacyPrune is the number of legacy tokens past which adding one
// first forgets those whose session has ended (expired, revoked).
const legacyPrune = 4096

// addLegacy remembers a legacy token of a login session.
func (f *Front) addLegacy(tok, as, username, session string) {
	c := f.creds
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.legacy) >= legacyPrune {
		for k, e := range c.legacy {
			if _, _, err := f.auth.Authenticate(e.session); err != nil && !errors.Is(err, auth.ErrSessionsLoading) {
				delete(c.legacy, k)
			}
		}
	}
	c.legacy[hashOf(tok)] = legacyEntry{as: as, username: username, session: session}
}

// dropSession forgets the legacy tokens and cached JWTs of a session
// (logout).
func (f *Front) dropSession(session string) {
	c := f.creds
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.legacy {
		if e.session == session {
			delete(c.legacy, k)
		}
	}
	for k, e := range c.jwts {
		if e.session == session {
			delete(c.jwts, k)
		}
	}
}

// putPersistent stores a persistent token of (username, audience),
// replacing the one before: the store first, so a token is never valid
// here that a restart would forget.
func (f *Front) putPersistent(ctx context.Context, username, audience, tok string) error {
	r := TokenRecord{Username: username, Audience: audience, Hash: hashOf(tok), Created: f.now()}
	if err := f.store.PutToken(ctx, r); err != nil {
		return err
	}
	c := f.creds
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [2]string{username, audience}
	if old, ok := c.byAudience[k]; ok {
		delete(c.persistent, old)
	}
	c.persistent[r.Hash], c.byAudience[k] = r, r.Hash
	return nil
}

// hasPersistent reports whether (username, audience) has a token.
func (f *Front) hasPersistent(username, audience string) bool {
	f.creds.mu.RLock()
	defer f.creds.mu.RUnlock()
	_, ok := f.creds.byAudience[[2]string{username, audience}]
	return ok
}

// dropPersistent revokes (username, audience)'s token: here at once, then
// in the store.
func (f *Front) dropPersistent(ctx context.Context, username, audience string) error {
	c := f.creds
	c.mu.Lock()
	k := [2]string{username, audience}
	if h, ok := c.byAudience[k]; ok {
		delete(c.persistent, h)
		delete(c.byAudience, k)
		for t, e := range c.jwts {
			if e.hash == h && e.audience != "" {
				delete(c.jwts, t)
			}
		}
	}
	c.mu.Unlock()
	return f.store.DeleteToken(ctx, username, audience)
}
