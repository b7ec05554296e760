package auth

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Config configures a Service. The zero value is usable.
type Config struct {
	// TokenTTL is how long a token lives. Default 12 h.
	TokenTTL time.Duration
	// UserBurst login attempts per (user name, client address) may be made
	// at once, then one more every UserEvery. Defaults 5 and 1 minute.
	// UserEvery is also how fast a user name's failure score decays (one
	// failure per UserEvery).
	UserBurst int
	UserEvery time.Duration
	// DelayAfter failures of one user name (from all addresses, decaying)
	// are free; past them every address not known for the name must wait
	// DelayBase between tries, doubling per further failure up to
	// DelayMax. Defaults 10, 1 s and 10 minutes. A name is never locked:
	// the first try from an address and any try from a known one pass.
	DelayAfter int
	DelayBase  time.Duration
	DelayMax   time.Duration
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
}

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
	cost := DefaultCost
	if len(users.list) > 0 {
		if c, err := bcrypt.Cost([]byte(users.list[0].PasswordHash)); err == nil {
			cost = c
		}
	}
	s := &Service{
		cost:       cost,
		tokens:     NewTokens(cfg.TokenTTL, cfg.Now, cfg.Rand),
		guard:      newGuard(cfg),
		sweepEvery: cfg.SweepEvery,
	}
	s.users.Store(users)
	return s
}

// Users returns the current user set.
func (s *Service) Users() *Users { return s.users.Load() }

// SetUsers replaces the user set (a reloaded users file) without touching
// open sessions: a token stays valid while its user is still in the set,
// with the role, endpoints and permissions of the new set from its next
// request on; the tokens of users no longer in the set are revoked. It
// returns the number of revoked tokens. nil means nobody.
func (s *Service) SetUsers(users *Users) int {
	if users == nil {
		users = &Users{byName: map[string]*User{}}
	}
	old := s.users.Swap(users)
	revoked := 0
	for _, u := range old.list {
		if _, ok := users.Lookup(u.Username); !ok {
			revoked += s.tokens.RevokeUser(u.Username)
		}
	}
	return revoked
}

// Tokens returns the token store.
func (s *Service) Tokens() *Tokens { return s.tokens }

// Session is a successful login.
type Session struct {
	Token     string
	ExpiresAt time.Time
	User      *User
}

// Login checks a password and issues a token. clientAddr is the client's
// IP address (with or without port) for the limits (see guard). Errors:
// *RateLimitError, ErrBadCredentials, or a failure to draw randomness.
func (s *Service) Login(username, password, clientAddr string) (Session, error) {
	ip := ipKey(clientAddr)
	if rl := s.guard.admit(username, ip); rl != nil {
		return Session{}, rl
	}
	u, ok := s.Users().Lookup(username)
	if !ok {
		checkPassword(dummyHash(s.cost), password) // same time as a wrong password
		s.guard.failed(username)
		return Session{}, ErrBadCredentials
	}
	if !checkPassword(u.PasswordHash, password) {
		s.guard.failed(username)
		return Session{}, ErrBadCredentials
	}
	s.guard.succeeded(username, ip)
	tok, exp, err := s.tokens.Issue(u.Username)
	if err != nil {
		return Session{}, err
	}
	return Session{Token: tok, ExpiresAt: exp, User: u}, nil
}

// Authenticate returns the user a token belongs to and when the token
// expires. Errors: ErrTokenUnknown, ErrTokenExpired. A token of a user no
// longer in the users set is unknown. It does not allocate.
func (s *Service) Authenticate(token string) (*User, time.Time, error) {
	name, exp, err := s.tokens.Check(token)
	if err != nil {
		return nil, exp, err
	}
	u, ok := s.Users().Lookup(name)
	if !ok {
		return nil, time.Time{}, ErrTokenUnknown
	}
	return u, exp, nil
}

// Logout revokes a token; revoking an unknown token is not an error.
func (s *Service) Logout(token string) { s.tokens.Revoke(token) }

// Sweep drops long-expired tokens and idle rate-limit buckets.
func (s *Service) Sweep() {
	s.tokens.Sweep(expiredGrace)
	s.guard.sweep()
}

// Run sweeps every Config.SweepEvery until ctx is done, then returns
// ctx.Err().
func (s *Service) Run(ctx context.Context) error {
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
