package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// DefaultTokenTTL is how long a token lives when Config.TokenTTL is zero.
const DefaultTokenTTL = 12 * time.Hour

// tokenBytes is the entropy of a token: 256 bits.
const tokenBytes = 32

// tokenLen is the length of a token as text (unpadded base64url).
var tokenLen = base64.RawURLEncoding.EncodedLen(tokenBytes)

var (
	// ErrTokenUnknown: no such token (never issued, revoked, or expired long
	// ago and swept).
	ErrTokenUnknown = errors.New("auth: unknown token")
	// ErrTokenExpired: the token was valid but its time is up.
	ErrTokenExpired = errors.New("auth: token expired")
)

// tokenHash is what the store keeps instead of the token: leaking the
// store's memory (a heap dump, a core file) leaks no usable token.
type tokenHash [sha256.Size]byte

type tokenEntry struct {
	username string
	expires  time.Time
}

// Tokens stores bearer tokens hashed. Safe for concurrent use.
type Tokens struct {
	// Immutable after NewTokens.
	ttl  time.Duration
	now  func() time.Time
	rand io.Reader

	mu sync.RWMutex // guards m
	m  map[tokenHash]tokenEntry
}

// NewTokens returns an empty store issuing tokens valid for ttl (default
// DefaultTokenTTL), reading time from now (default time.Now) and entropy
// from rnd (default crypto/rand).
func NewTokens(ttl time.Duration, now func() time.Time, rnd io.Reader) *Tokens {
	if ttl <= 0 {
		ttl = DefaultTokenTTL
	}
	if now == nil {
		now = time.Now
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	return &Tokens{ttl: ttl, now: now, rand: rnd, m: map[tokenHash]tokenEntry{}}
}

// hashToken hashes without allocating: the token is copied to a stack
// buffer first (tokens longer than that are never valid).
func hashToken(token string) (tokenHash, bool) {
	if len(token) != tokenLen {
		return tokenHash{}, false
	}
	var buf [64]byte
	n := copy(buf[:], token)
	return sha256.Sum256(buf[:n]), true
}

// Issue makes a new token for username.
func (t *Tokens) Issue(username string) (token string, expires time.Time, err error) {
	var raw [tokenBytes]byte
	if _, err := io.ReadFull(t.rand, raw[:]); err != nil {
		return "", time.Time{}, fmt.Errorf("auth: issue token: %w", err)
	}
	token = base64.RawURLEncoding.EncodeToString(raw[:])
	h, _ := hashToken(token)
	expires = t.now().Add(t.ttl)
	t.mu.Lock()
	t.m[h] = tokenEntry{username: username, expires: expires}
	t.mu.Unlock()
	return token, expires, nil
}

// Check returns the user name a token was issued to and when it expires,
// or ErrTokenUnknown / ErrTokenExpired. It does not allocate.
func (t *Tokens) Check(token string) (username string, expires time.Time, err error) {
	h, ok := hashToken(token)
	if !ok {
		return "", time.Time{}, ErrTokenUnknown
	}
	t.mu.RLock()
	e, ok := t.m[h]
	t.mu.RUnlock()
	if !ok {
		return "", time.Time{}, ErrTokenUnknown
	}
	if !t.now().Before(e.expires) {
		return "", e.expires, ErrTokenExpired
	}
	return e.username, e.expires, nil
}

// Revoke forgets a token; it reports whether it existed.
func (t *Tokens) Revoke(token string) bool {
	h, ok := hashToken(token)
	if !ok {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok = t.m[h]
	delete(t.m, h)
	return ok
}

// RevokeUser forgets every token of username and returns how many.
func (t *Tokens) RevokeUser(username string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for h, e := range t.m {
		if e.username == username {
			delete(t.m, h)
			n++
		}
	}
	return n
}

// Sweep forgets tokens that expired more than grace ago and returns how
// many. Until swept, an expired token answers ErrTokenExpired rather than
// ErrTokenUnknown, which lets clients tell "log in again" from "wrong
// token".
func (t *Tokens) Sweep(grace time.Duration) int {
	cut := t.now().Add(-grace)
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for h, e := range t.m {
		if e.expires.Before(cut) {
			delete(t.m, h)
			n++
		}
	}
	return n
}

// Len is the number of stored tokens, expired ones not yet swept included.
func (t *Tokens) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}
