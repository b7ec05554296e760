package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Config configures a Service. The zero value is usable.
type Config struct {
	// TokenTTL is how long an access token lives. Default 12 h.
	TokenTTL time.Duration
	// RefreshTTL is how long a refresh token lives. Default 30 days.
	RefreshTTL time.Duration
	// Store keeps the sessions across restarts (LoadSessions reads them
	// back). Default none: sessions live in memory only.
	Store SessionStore
	// Shared, when set, is the session table of every node of the
	// deployment (see SharedSessions): sessions are written there first,
	// Store taking what it cannot, and a logout on any node ends the
	// session on all. Default none: each node knows its own sessions.
	Shared SharedSessions
	// Log receives store failures and guessing attacks. Default: discard.
	Log *slog.Logger
	// UserBurst login attempts per (user name, client address) may be made
	// at once, then one more every UserEvery. Defaults 5 and 1 minute.
	// UserEvery is also how fast a user name's failure score decays (one
	// failure per UserEvery).
	UserBurst int
	UserEvery time.Duration
	// DelayAfter failures of one user name (from all addresses, decaying)
	// are free; past them the addresses not known for the name share one
	// try per DelayBase, doubling per further failure up to DelayMax.
	// Once the name's failures reach UserBudget, no address not known
	// for it may try until they decay below. Defaults 10, 1 s, 10 minutes
	// and 30. A name is never locked for its user: any try from an
	// address she logged in from (KnownFor) passes.
	DelayAfter int
	DelayBase  time.Duration
	DelayMax   time.Duration
	UserBudget int
	// KnownFor is how long an address the user logged in from stays known
	// for her (exempt from the per-name delay). Default 30 days.
	KnownFor time.Duration
	// IPBurst login attempts per client address (per /64 for IPv6) may be
	// made at once, then one more every IPEvery. Defaults 20 and 3 s.
	IPBurst int
	IPEvery time.Duration
	// SweepEvery is how often Run drops expired tokens and idle rate-limit
	// buckets. Default 1 minute.
	SweepEvery time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Rand is the entropy of tokens. Default crypto/rand.
	Rand io.Reader
}

// ErrBadCredentials: unknown user or wrong password (deliberately not said
// which).
var ErrBadCredentials = errors.New("auth: wrong user name or password")

// expiredGrace is how long an expired token is remembered so that it is
// reported as expired rather than unknown.
const expiredGrace = time.Hour

// Service is logins, tokens and the login rate limit over one set of users.
// Safe for concurrent use.
type Service struct {
	users atomic.Pointer[Users] // swapped whole by SetUsers

	// Immutable after NewService.
	tokens     *Tokens
	guard      *guard
	sweepEvery time.Duration
	cost       int // bcrypt cost of the users' hashes, for unknown users
	store      SessionStore
	log        *slog.Logger
	loaded     atomic.Bool // the store's sessions were all read back

	revokedMu sync.Mutex
	revoked   map[string]time.Time // sessions ended in this process, by id: a read-back never revives them

	// With Config.Shared (shared.go).
	shared        SharedSessions
	lookups       chan struct{} // table lookups of unknown tokens in flight
	listening     atomic.Bool
	sharedFound   atomic.Uint64
	sharedRevoked atomic.Uint64
	sharedResyncs atomic.Uint64
	fails         sharedFails
}

// revokedKeep is how long an ended session's id is remembered: longer
// than any token lives, so a store that missed the deletion cannot bring
// it back.
const revokedKeep = 30 * 24 * time.Hour

// ErrSessionsLoading: the token is not known yet, but the stored sessions
// have not all been read back (the database is not ready): it may be one
// of them. Callers answer 503 with a short Retry-After, not 401, so a
// client is not logged out by a restart.
var ErrSessionsLoading = errors.New("auth: sessions are still being restored")

// NewService returns a service for users (nil: nobody can log in).
func NewService(users *Users, cfg Config) *Service {
	if cfg.UserBurst <= 0 {
		cfg.UserBurst = 5
	}
	if cfg.UserEvery <= 0 {
		cfg.UserEvery = time.Minute
	}
	if cfg.IPBurst <= 0 {
		cfg.IPBurst = 20
	}
	if cfg.IPEvery <= 0 {
		cfg.IPEvery = 3 * time.Second
	}
	if cfg.DelayAfter <= 0 {
		cfg.DelayAfter = 10
	}
	if cfg.DelayBase <= 0 {
		cfg.DelayBase = time.Second
	}
	if cfg.DelayMax <= 0 {
		cfg.DelayMax = 10 * time.Minute
	}
	if cfg.UserBudget <= 0 {
		cfg.UserBudget = 30
	}
	if cfg.KnownFor <= 0 {
		cfg.KnownFor = 30 * 24 * time.Hour
	}
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if users == nil {
		users = &Users{byName: map[string]*User{}}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cost := DefaultCost
	if len(users.list) > 0 {
		if c, err := bcrypt.Cost([]byte(users.list[0].PasswordHash)); err == nil {
			cost = c
		}
	}
	s := &Service{
		cost:       cost,
		tokens:     NewTokens(cfg.TokenTTL, cfg.Now, cfg.Rand),
		store:      cfg.Store,
		log:        cfg.Log.With("component", "auth"),
		guard:      newGuard(cfg),
		sweepEvery: cfg.SweepEvery,
		shared:     cfg.Shared,
		lookups:    make(chan struct{}, sharedLookups),
		fails:      newSharedFails(),
	}
	s.users.Store(users)
	if cfg.RefreshTTL > 0 {
		s.tokens.refreshTTL = cfg.RefreshTTL
	}
	return s
}

// Users returns the current user set.
func (s *Service) Users() *Users { return s.users.Load() }

// SetUsers replaces the user set (a reloaded users file or directory).
// Sessions of users no longer in the set, and of users whose password,
// role, endpoints, groups or permissions changed, are revoked (their
// WebSockets closed at once, through OnRevoke); the others go on, a
// changed display name showing from the next request. It returns the
// number of revoked sessions. nil means nobody.
func (s *Service) SetUsers(users *Users) int {
	if users == nil {
		users = &Users{byName: map[string]*User{}}
	}
	old := s.users.Swap(users)
	var ids []string
	for _, u := range old.list {
		if nu, ok := users.Lookup(u.Username); !ok || !sameGrants(u, nu) {
			ids = append(ids, s.tokens.revoke(func(se *session) bool { return se.rec.Username == u.Username })...)
		}
	}
	s.forget(ids)
	return len(ids)
}

// sameGrants reports whether a and b (one user before and after a reload)
// may log in with the same password and do and see the same things: her
// own record, and also her scope, which a colleague's change of group or
// endpoints alters (an open WebSocket keeps the user it authenticated).
func sameGrants(a, b *User) bool {
	return a.PasswordHash == b.PasswordHash && a.Role == b.Role && a.caps == b.caps && slices.Equal(a.Endpoints, b.Endpoints) &&
		slices.Equal(a.Groups, b.Groups) && slices.Equal(a.Permissions, b.Permissions) && slices.Equal(a.PBXs, b.PBXs) && a.viewKey == b.viewKey &&
		slices.Equal(a.Scope(), b.Scope())
}

// Tokens returns the token store.
func (s *Service) Tokens() *Tokens { return s.tokens }

// Session is a successful login (or refresh).
type Session struct {
	ID               string // names the session for listing and revocation
	Token            string
	ExpiresAt        time.Time
	RefreshToken     string
	RefreshExpiresAt time.Time
	User             *User
}

func sessionOf(is Issued, u *User) Session {
	return Session{ID: is.Record.ID, Token: is.Token, ExpiresAt: is.Record.Expires,
		RefreshToken: is.RefreshToken, RefreshExpiresAt: is.Record.RefreshExp, User: u}
}

// Login checks a password and issues a session. clientAddr is the
// client's IP address (with or without port) for the limits (see guard).
// Errors: *RateLimitError, ErrBadCredentials, or a failure to draw
// randomness.
func (s *Service) Login(username, password, clientAddr string) (Session, error) {
	ip := ipKey(clientAddr)
	if rl := s.guard.admit(username, ip); rl != nil {
		return Session{}, rl
	}
	u, ok := s.Users().Lookup(username)
	if !ok {
		checkPassword(dummyHash(s.cost), password) // same time as a wrong password
		s.failed(username, ip)
		return Session{}, ErrBadCredentials
	}
	if err := s.verify(u, password); err != nil {
		switch {
		case errors.Is(err, ErrBadCredentials):
			s.failed(username, ip)
		case errors.Is(err, ErrDirectoryUnavailable):
			s.guard.untried(username, ip)
		}
		return Session{}, err
	}
	s.guard.succeeded(username, ip)
	is, err := s.tokens.IssueSession(u.Username, ip)
	if err != nil {
		return Session{}, err
	}
	s.persist(is.Record)
	return sessionOf(is, u), nil
}

// verify checks u's password: the users file's hash, or u's directory.
func (s *Service) verify(u *User, password string) error {
	if u.Checker != nil && u.PasswordHash == "" {
		err := u.Checker.CheckPassword(u.Username, password)
		if err != nil && !errors.Is(err, ErrDirectoryUnavailable) {
			return ErrBadCredentials // whatever else the directory says, never an open door
		}
		return err
	}
	if !checkPassword(u.PasswordHash, password) {
		return ErrBadCredentials
	}
	return nil
}

// Refresh spends a refresh token for a new session (new access and
// refresh tokens); the old access token lives on until it expires.
// Errors: ErrTokenUnknown (spent, revoked, never issued, or its user is
// gone), ErrTokenExpired.
func (s *Service) Refresh(refreshToken, clientAddr string) (Session, error) {
	refresh := s.tokens.Refresh
	if s.shared != nil {
		refresh = s.refreshShared
	}
	is, spent, err := refresh(refreshToken, ipKey(clientAddr))
	if spent.ID != "" {
		s.persist(spent)
	}
	if err != nil {
		return Session{}, err
	}
	u, ok := s.Users().Lookup(is.Record.Username)
	if !ok {
		s.forget(s.tokens.revoke(func(se *session) bool { return se.rec.ID == is.Record.ID }))
		return Session{}, ErrTokenUnknown
	}
	s.persist(is.Record)
	return sessionOf(is, u), nil
}

// Authenticate returns the user a token belongs to and when the token
// expires. Errors: ErrTokenUnknown, ErrTokenExpired. A token of a user no
// longer in the users set is unknown. It does not allocate for a token
// held in memory; one that is not is looked up once in Config.Shared.
func (s *Service) Authenticate(token string) (*User, time.Time, error) {
	name, exp, err := s.tokens.Check(token)
	if err == ErrTokenUnknown && s.shared != nil {
		if h, ok := hashToken(token); ok && s.findShared(h, false) {
			name, exp, err = s.tokens.Check(token)
		}
	}
	if err != nil {
		if err == ErrTokenUnknown && s.store != nil && !s.loaded.Load() {
			return nil, exp, ErrSessionsLoading
		}
		return nil, exp, err
	}
	u, ok := s.Users().Lookup(name)
	if !ok {
		return nil, time.Time{}, ErrTokenUnknown
	}
	return u, exp, nil
}

// GuardStats reports what the login limits see now: user names under a
// guessing attack, and tries refused by the per-name limits.
func (s *Service) GuardStats() GuardStats { return s.guard.stats() }

// OnRevoke calls f once when token's session is revoked (see
// Tokens.OnRevoke); the WebSocket hub closes the client then.
func (s *Service) OnRevoke(token string, f func()) (stop func()) { return s.tokens.OnRevoke(token, f) }

// Logout revokes a token's session; revoking an unknown token is not an
// error.
func (s *Service) Logout(token string) {
	h, ok := hashToken(token)
	if !ok {
		return
	}
	if s.shared != nil {
		if _, _, err := s.tokens.Check(token); err == ErrTokenUnknown {
			s.findShared(h, false) // another node's, not heard of yet: ended everywhere all the same
		}
	}
	s.forget(s.tokens.revoke(func(se *session) bool { return se.rec.AccessHash == h }))
}

// SessionID names the session of an access token ("" if none).
func (s *Service) SessionID(token string) string {
	h, ok := hashToken(token)
	if !ok {
		return ""
	}
	s.tokens.mu.RLock()
	defer s.tokens.mu.RUnlock()
	if se := s.tokens.m[h]; se != nil {
		return se.rec.ID
	}
	return ""
}

// Sessions lists the sessions of username ("" for everyone's), oldest
// first.
func (s *Service) Sessions(username string) []SessionRecord { return s.tokens.List(username) }

// RevokeSession ends the session named id, if it belongs to username (""
// for anyone's: an admin). It reports whether one was ended.
func (s *Service) RevokeSession(id, username string) bool {
	ids := s.tokens.revoke(func(se *session) bool {
		return se.rec.ID == id && (username == "" || se.rec.Username == username)
	})
	s.forget(ids)
	return len(ids) > 0
}

// RevokeUser ends every session of username and returns how many.
func (s *Service) RevokeUser(username string) int {
	ids := s.tokens.revoke(func(se *session) bool { return se.rec.Username == username })
	s.forget(ids)
	return len(ids)
}

// storeTimeout bounds one write of the session store.
const storeTimeout = 3 * time.Second

// persist writes records to the shared table, or when it fails (or there
// is none) to the store. A failure of the store is logged: the session
// works in this process but will not survive a restart.
func (s *Service) persist(recs ...SessionRecord) {
	for _, r := range recs {
		if s.shared != nil {
			ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
			err := s.shared.PutSession(ctx, r)
			cancel()
			s.tokens.setPending(r.ID, err != nil) // written at the next resync
			if err == nil {
				continue
			}
		}
		if s.store == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err := s.store.PutSession(ctx, r)
		cancel()
		if err != nil {
			s.log.Warn("session not stored: it will not survive a restart", "session", r.ID, "user", r.Username, "err", err)
		}
	}
}

// forget removes sessions from the store.
func (s *Service) forget(ids []string) {
	if len(ids) == 0 {
		return
	}
	s.revokedMu.Lock()
	if s.revoked == nil {
		s.revoked = map[string]time.Time{}
	}
	now := time.Now()
	gone := make(map[string]bool, len(ids))
	for _, id := range ids {
		s.revoked[id] = now
		gone[id] = true
	}
	s.revokedMu.Unlock()
	// A read-back that took the lock first may have added one again.
	s.tokens.revoke(func(se *session) bool { return gone[se.rec.ID] })
	if s.store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := s.store.DeleteSessions(ctx, ids); err != nil {
		s.log.Error("revoked sessions still in the store: they would come back after a restart", "sessions", ids, "err", err)
	}
}

// LoadSessions reads the stored sessions back (at start, after a
// restart; again when the database becomes ready) and returns how many
// it added (sessions already held are kept as they are). Sessions of users not in the
// current set are loaded too: Authenticate refuses them, and SetUsers
// revokes them if the user stays away.
func (s *Service) LoadSessions(ctx context.Context) (int, error) {
	if s.store == nil {
		return 0, nil
	}
	var inShared map[string]bool
	if s.shared != nil {
		// What the shared table lacks was written to the store alone (the
		// table did not answer): written to it at the next resync.
		inShared = map[string]bool{}
		if recs, err := s.shared.LoadSessions(ctx); err == nil {
			for _, r := range recs {
				inShared[r.ID] = true
			}
		}
	}
	recs, err := s.store.LoadSessions(ctx)
	n := 0
	s.revokedMu.Lock()
	defer s.revokedMu.Unlock()
	for _, r := range recs {
		// A session ended while the store was being read (or that the
		// store failed to delete) stays ended.
		if _, gone := s.revoked[r.ID]; r.Revoked || r.ID == "" || gone {
			continue
		}
		if s.tokens.add(r) {
			if inShared != nil && !inShared[r.ID] {
				s.tokens.setPending(r.ID, true)
			}
			n++
			if r.ClientAddr != "" {
				s.guard.remember(r.Username, r.ClientAddr, r.Created) // her usual address survives the restart
			}
		}
	}
	if err != nil {
		return n, fmt.Errorf("auth: load sessions: %w", err)
	}
	s.loaded.Store(true)
	return n, nil
}

// Sweep drops long-expired sessions (from the store too) and idle
// rate-limit buckets.
func (s *Service) Sweep() {
	s.forget(s.tokens.Sweep(expiredGrace))
	s.guard.sweep()
	s.revokedMu.Lock()
	for id, at := range s.revoked {
		if time.Since(at) > revokedKeep {
			delete(s.revoked, id)
		}
	}
	s.revokedMu.Unlock()
}

// Run sweeps every Config.SweepEvery, and with Config.Shared listens to
// the other nodes' changes, until ctx is done, then returns ctx.Err().
func (s *Service) Run(ctx context.Context) error {
	if s.shared != nil {
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() { s.watchShared(ctx) })
		wg.Go(func() { s.tellFailures(ctx) })
	}
	t := time.NewTicker(s.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			s.Sweep()
		}
	}
}
