package auth

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// DefaultTokenTTL is how long an access token lives when Config.TokenTTL
// is zero; DefaultRefreshTTL likewise for a refresh token.
const (
	DefaultTokenTTL   = 12 * time.Hour
	DefaultRefreshTTL = 30 * 24 * time.Hour
)

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
// store's memory or its database leaks no usable token.
type tokenHash [sha256.Size]byte

// SessionRecord is one login as stored: hashes only, never a token.
type SessionRecord struct {
	// ID names the session for listing and revocation; it is not a
	// credential (the first 8 bytes of the access token's hash, in hex).
	ID          string
	Username    string
	AccessHash  [sha256.Size]byte
	RefreshHash [sha256.Size]byte // zero: no refresh token (used or none issued)
	Created     time.Time
	Expires     time.Time // of the access token
	RefreshExp  time.Time // of the refresh token
	ClientAddr  string    // the login's client address (rate-limit key)
	// Revoked marks a tombstone: a revocation a store could not apply yet
	// (Fallback). Never set on a live session.
	Revoked bool `json:",omitempty"`
}

type session struct {
	rec      SessionRecord
	watchers map[*watcher]struct{} // told when the session is revoked
	pending  bool                  // not yet written to the shared table (Service with Config.Shared)
}

type watcher struct{ f func() }

// Tokens holds the sessions in memory, indexed by the hashes of their
// access and refresh tokens. Safe for concurrent use.
type Tokens struct {
	// Immutable after NewTokens.
	ttl, refreshTTL time.Duration
	now             func() time.Time
	rand            io.Reader

	mu      sync.RWMutex // guards m, refresh, byID
	m       map[tokenHash]*session
	refresh map[tokenHash]*session
	byID    map[string]*session
}

// NewTokens returns an empty store issuing access tokens valid for ttl
// (default DefaultTokenTTL) and refresh tokens valid for DefaultRefreshTTL,
// reading time from now (default time.Now) and entropy from rnd (default
// crypto/rand).
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
	return &Tokens{ttl: ttl, refreshTTL: DefaultRefreshTTL, now: now, rand: rnd,
		m: map[tokenHash]*session{}, refresh: map[tokenHash]*session{}, byID: map[string]*session{}}
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

func (t *Tokens) newToken() (string, tokenHash, error) {
	var raw [tokenBytes]byte
	if _, err := io.ReadFull(t.rand, raw[:]); err != nil {
		return "", tokenHash{}, fmt.Errorf("auth: issue token: %w", err)
	}
	tok := base64.RawURLEncoding.EncodeToString(raw[:])
	h, _ := hashToken(tok)
	return tok, h, nil
}

// Issued is a new session's tokens and its stored record.
type Issued struct {
	Token, RefreshToken string
	Record              SessionRecord
}

// IssueSession makes a new session (access and refresh token) for
// username logging in from clientAddr.
func (t *Tokens) IssueSession(username, clientAddr string) (Issued, error) {
	return t.issue(username, clientAddr, true)
}

// Issue makes a new access token for username (a session without a
// refresh token).
func (t *Tokens) Issue(username string) (token string, expires time.Time, err error) {
	is, err := t.issue(username, "", false)
	return is.Token, is.Record.Expires, err
}

func (t *Tokens) issue(username, clientAddr string, withRefresh bool) (Issued, error) {
	tok, h, err := t.newToken()
	if err != nil {
		return Issued{}, err
	}
	now := t.now()
	is := Issued{Token: tok, Record: SessionRecord{ID: hex.EncodeToString(h[:8]), Username: username, AccessHash: h,
		Created: now, Expires: now.Add(t.ttl), ClientAddr: clientAddr}}
	if withRefresh {
		if is.RefreshToken, is.Record.RefreshHash, err = t.newToken(); err != nil {
			return Issued{}, err
		}
		is.Record.RefreshExp = now.Add(t.refreshTTL)
	}
	t.add(is.Record)
	return is, nil
}

// add puts a record in the maps (a new session, or one loaded from the
// store); a session already held is kept as it is (with its watchers).
func (t *Tokens) add(rec SessionRecord) bool {
	s := &session{rec: rec}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.byID[rec.ID]; ok {
		return false
	}
	t.m[rec.AccessHash] = s
	if rec.RefreshHash != (tokenHash{}) {
		t.refresh[rec.RefreshHash] = s
	}
	t.byID[rec.ID] = s
	return true
}

// Check returns the user name a token was issued to and when it expires,
// or ErrTokenUnknown / ErrTokenExpired. It does not allocate.
func (t *Tokens) Check(token string) (username string, expires time.Time, err error) {
	h, ok := hashToken(token)
	if !ok {
		return "", time.Time{}, ErrTokenUnknown
	}
	t.mu.RLock()
	s, ok := t.m[h]
	var name string
	var exp time.Time
	if ok {
		name, exp = s.rec.Username, s.rec.Expires
	}
	t.mu.RUnlock()
	if !ok {
		return "", time.Time{}, ErrTokenUnknown
	}
	if !t.now().Before(exp) {
		return "", exp, ErrTokenExpired
	}
	return name, exp, nil
}

// Refresh spends a refresh token (once): the session it belongs to keeps
// its access token until that expires, and a new session is issued. It
// returns the new session and the spent one's record as it is now.
// Errors: ErrTokenUnknown (never issued, already spent, revoked) and
// ErrTokenExpired.
func (t *Tokens) Refresh(refreshToken, clientAddr string) (Issued, SessionRecord, error) {
	h, ok := hashToken(refreshToken)
	if !ok {
		return Issued{}, SessionRecord{}, ErrTokenUnknown
	}
	t.mu.Lock()
	s, ok := t.refresh[h]
	if !ok {
		t.mu.Unlock()
		return Issued{}, SessionRecord{}, ErrTokenUnknown
	}
	delete(t.refresh, h)
	exp := s.rec.RefreshExp
	s.rec.RefreshHash, s.rec.RefreshExp = tokenHash{}, time.Time{}
	spent := s.rec
	t.mu.Unlock()
	if !t.now().Before(exp) {
		return Issued{}, spent, ErrTokenExpired
	}
	is, err := t.IssueSession(spent.Username, clientAddr)
	return is, spent, err
}

// OnRevoke calls f once, from the revoking goroutine, when token's session
// is revoked (logout, an admin's revocation, its user removed or changed);
// not when it merely expires. The returned function stops the watch. An
// unknown token is reported at once.
func (t *Tokens) OnRevoke(token string, f func()) (stop func()) {
	h, _ := hashToken(token)
	w := &watcher{f: f}
	t.mu.Lock()
	s, ok := t.m[h]
	if ok {
		if s.watchers == nil {
			s.watchers = map[*watcher]struct{}{}
		}
		s.watchers[w] = struct{}{}
	}
	t.mu.Unlock()
	if !ok {
		f()
		return func() {}
	}
	return func() {
		t.mu.Lock()
		delete(s.watchers, w)
		t.mu.Unlock()
	}
}

// removeLocked drops s from every index and returns its watchers.
func (t *Tokens) removeLocked(s *session) []*watcher {
	delete(t.m, s.rec.AccessHash)
	if s.rec.RefreshHash != (tokenHash{}) {
		delete(t.refresh, s.rec.RefreshHash)
	}
	delete(t.byID, s.rec.ID)
	ws := make([]*watcher, 0, len(s.watchers))
	for w := range s.watchers {
		ws = append(ws, w)
	}
	s.watchers = nil
	return ws
}

// revoke removes the sessions match selects and tells their watchers; it
// returns the IDs removed.
func (t *Tokens) revoke(match func(*session) bool) []string {
	var ids []string
	var tell []*watcher
	t.mu.Lock()
	for _, s := range t.byID {
		if match(s) {
			ids = append(ids, s.rec.ID)
			tell = append(tell, t.removeLocked(s)...)
		}
	}
	t.mu.Unlock()
	for _, w := range tell {
		w.f()
	}
	slices.Sort(ids)
	return ids
}

// Revoke ends the session of an access token; it reports whether it
// existed.
func (t *Tokens) Revoke(token string) bool {
	h, ok := hashToken(token)
	if !ok {
		return false
	}
	return len(t.revoke(func(s *session) bool { return s.rec.AccessHash == h })) > 0
}

// RevokeID ends the session named id; it reports whether it existed.
func (t *Tokens) RevokeID(id string) bool {
	return len(t.revoke(func(s *session) bool { return s.rec.ID == id })) > 0
}

// RevokeUser ends every session of username and returns how many.
func (t *Tokens) RevokeUser(username string) int {
	return len(t.revoke(func(s *session) bool { return s.rec.Username == username }))
}

// Sweep forgets sessions whose access token expired more than grace ago
// and whose refresh token is spent or expired, and returns their IDs.
// Until swept, an expired token answers ErrTokenExpired rather than
// ErrTokenUnknown, which lets clients tell "log in again" from "wrong
// token". Watchers are not told: the WebSocket closes on expiry itself.
func (t *Tokens) Sweep(grace time.Duration) []string {
	now := t.now()
	cut := now.Add(-grace)
	var ids []string
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.byID {
		if s.rec.Expires.Before(cut) && !now.Before(s.rec.RefreshExp) {
			ids = append(ids, s.rec.ID)
			t.removeLocked(s)
		}
	}
	return ids
}

// List returns the sessions of username ("" for everyone's), oldest
// first.
func (t *Tokens) List(username string) []SessionRecord {
	t.mu.RLock()
	out := make([]SessionRecord, 0, len(t.byID))
	for _, s := range t.byID {
		if username == "" || s.rec.Username == username {
			out = append(out, s.rec)
		}
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b SessionRecord) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}

// Len is the number of stored sessions, expired ones not yet swept
// included.
func (t *Tokens) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byID)
}
