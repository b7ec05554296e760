package directory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ctibridge/ctibridge/auth"
)

// Source is one directory of users: LDAP, FreePBX. Users returns every
// user it holds, without password hashes (an LDAP user carries a Checker;
// a FreePBX user has neither and cannot log in until a users-file or LDAP
// entry of the same name gives it a password). Users is called from one
// goroutine at a time.
type Source interface {
	Name() string
	Users(ctx context.Context) ([]auth.User, error)
}

// Config configures a Set. The zero value of every field is its default.
type Config struct {
	// Refresh is how often each source is read again. Default 5 minutes.
	Refresh time.Duration
	// TTL is how long a source's users may log in as last read while it
	// cannot be read again; past it their logins answer
	// auth.ErrDirectoryUnavailable (503) until the source is back. Open
	// sessions go on until their tokens expire. Default 1 hour.
	TTL time.Duration
	// Log receives refresh failures. Default: discard.
	Log *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Set merges the users file with the directories into the one user set
// auth.Service uses, and refreshes it. A name in the users file wins over
// the same name in a directory (and is logged once); between directories
// the first listed wins. Safe for concurrent use; Run owns the refresh.
type Set struct {
	// Immutable after New.
	svc     *auth.Service
	sources []Source
	cfg     Config
	log     *slog.Logger

	mu       sync.Mutex // guards the fields below
	file     *auth.Users
	profiles map[string]auth.Caps
	cached   map[string]cachedSource // by source name
}

type cachedSource struct {
	users []auth.User
	at    time.Time // last successful read
	err   error     // last read's error, nil when it succeeded
}

// New returns a set applying file (the users file; nil: none) and
// sources to svc.
func New(svc *auth.Service, file *auth.Users, sources []Source, cfg Config) *Set {
	if cfg.Refresh <= 0 {
		cfg.Refresh = 5 * time.Minute
	}
	if cfg.TTL <= 0 {
		cfg.TTL = time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Set{svc: svc, sources: sources, cfg: cfg, log: cfg.Log.With("component", "directory"),
		file: file, profiles: file.Profiles(), cached: map[string]cachedSource{}}
}

// SetFile replaces the users file (a reload) and applies the merge.
func (s *Set) SetFile(file *auth.Users) (revoked int, err error) {
	s.mu.Lock()
	s.file, s.profiles = file, file.Profiles()
	s.mu.Unlock()
	return s.apply()
}

// Refresh reads every source once and applies the merge. It returns the
// sources' errors joined (their previous users are kept until TTL).
func (s *Set) Refresh(ctx context.Context) error {
	var errs []error
	for _, src := range s.sources {
		us, err := src.Users(ctx)
		now := s.cfg.Now()
		s.mu.Lock()
		c := s.cached[src.Name()]
		if err != nil {
			c.err = err
			errs = append(errs, fmt.Errorf("directory %s: %w", src.Name(), err))
		} else {
			c = cachedSource{users: us, at: now}
		}
		s.cached[src.Name()] = c
		s.mu.Unlock()
	}
	if _, err := s.apply(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// apply builds the merged user set and gives it to the service.
func (s *Set) apply() (int, error) {
	now := s.cfg.Now()
	s.mu.Lock()
	var list []auth.User
	seen := map[string]string{}
	for _, u := range s.file.All() {
		list = append(list, *u)
		seen[u.Username] = "users file"
	}
	for _, src := range s.sources {
		c := s.cached[src.Name()]
		stale := now.Sub(c.at) > s.cfg.TTL
		for _, u := range c.users {
			if stale {
				u.PasswordHash, u.Checker = "", unavailable{}
			}
			if from, dup := seen[u.Username]; dup {
				s.log.Debug("directory user shadowed", "user", u.Username, "source", src.Name(), "by", from)
				continue
			}
			seen[u.Username] = src.Name()
			list = append(list, u)
		}
	}
	profiles := s.profiles
	s.mu.Unlock()
	us, err := auth.NewUsersWithProfiles(list, profiles)
	if err != nil {
		return 0, fmt.Errorf("directory: %w", err)
	}
	return s.svc.SetUsers(us), nil
}

// Status is one source's state, for logs and `ctibridge users list`.
type Status struct {
	Name  string
	Users int
	At    time.Time // last successful read (zero: never)
	Err   error     // last read's error
}

// Status reports every source.
func (s *Set) Status() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.sources))
	for _, src := range s.sources {
		c := s.cached[src.Name()]
		out = append(out, Status{Name: src.Name(), Users: len(c.users), At: c.at, Err: c.err})
	}
	return out
}

// Run refreshes every Config.Refresh until ctx is done; failures are
// logged at Warn (the previous users stay until TTL).
func (s *Set) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if err := s.Refresh(ctx); err != nil {
				s.log.Warn("directory refresh failed; keeping the users read before until the TTL", "err", err, "ttl", s.cfg.TTL)
			}
		}
	}
}

// unavailable is the password checker of users whose directory has not
// answered for longer than the TTL.
type unavailable struct{}

func (unavailable) CheckPassword(string, string) error { return auth.ErrDirectoryUnavailable }
