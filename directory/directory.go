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
	// SnapshotDir, when set, keeps each source's users as last read
	// (snapshot.go), read back when the source cannot be read at start:
	// its users then get auth.ErrDirectoryUnavailable (503), never a
	// wrong password (401), and their sessions go on. Default none.
	SnapshotDir string
	// Retry is how often a source that failed its last read is tried
	// again (so a directory back is used at once, not at the next
	// Refresh). Default 2 s.
	Retry time.Duration
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
	users    []auth.User
	at       time.Time // last successful read
	err      error     // last read's error, nil when it succeeded
	snapshot bool      // users read back from the snapshot, not from the source
}

// fromSnapshot is source's snapshot for a start with the source down
// (nil users when there is none or it cannot be read: logged).
func (s *Set) fromSnapshot(source string) ([]auth.User, time.Time, bool) {
	us, at, err := s.loadSnapshot(source)
	if err != nil {
		s.log.Warn("directory snapshot unreadable: its users cannot log in until it answers", "source", source, "err", err)
		return nil, time.Time{}, false
	}
	if us != nil {
		s.log.Warn("directory down at start: its users known from its snapshot, their logins answer 503 until it is back",
			"source", source, "users", len(us), "read_at", at)
	}
	return us, at, us != nil
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
	if cfg.Retry <= 0 {
		cfg.Retry = 2 * time.Second
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
		c, known := s.cached[src.Name()]
		s.mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("directory %s: %w", src.Name(), err))
			if !known && s.cfg.SnapshotDir != "" {
				c.users, c.at, c.snapshot = s.fromSnapshot(src.Name())
			}
			c.err = err
		} else {
			c = cachedSource{users: us, at: now}
			if s.cfg.SnapshotDir != "" {
				if err := s.saveSnapshot(src.Name(), us, now); err != nil {
					s.log.Warn("directory snapshot not written: a restart while it is down would not know its users", "source", src.Name(), "err", err)
				}
			}
		}
		s.mu.Lock()
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
		stale := c.snapshot || now.Sub(c.at) > s.cfg.TTL
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
	// Snapshot: the users are the snapshot's (the source has not been
	// read since the start).
	Snapshot bool
}

// Status reports every source.
func (s *Set) Status() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.sources))
	for _, src := range s.sources {
		c := s.cached[src.Name()]
		out = append(out, Status{Name: src.Name(), Users: len(c.users), At: c.at, Err: c.err, Snapshot: c.snapshot})
	}
	return out
}

// Run refreshes every Config.Refresh, and every Config.Retry while a
// source failed its last read, until ctx is done; failures are logged at
// Warn (the previous users stay until TTL), once per outage.
func (s *Set) Run(ctx context.Context) error {
	failing := s.failing()
	for {
		wait := s.cfg.Refresh
		if failing {
			wait = min(wait, s.cfg.Retry)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		err := s.Refresh(ctx)
		switch {
		case err != nil && !failing:
			s.log.Warn("directory refresh failed; keeping the users read before until the TTL, retrying", "err", err, "ttl", s.cfg.TTL, "retry", s.cfg.Retry)
		case err == nil && failing:
			s.log.Info("directories read again")
		}
		failing = err != nil
	}
}

// failing reports whether a source failed its last read.
func (s *Set) failing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.cached {
		if c.err != nil {
			return true
		}
	}
	return false
}

// unavailable is the password checker of users whose directory has not
// answered for longer than the TTL.
type unavailable struct{}

func (unavailable) CheckPassword(string, string) error { return auth.ErrDirectoryUnavailable }
