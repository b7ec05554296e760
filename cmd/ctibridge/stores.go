package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/auth/authdb"
	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/phonebook"
	"github.com/ctibridge/ctibridge/rest"
	"github.com/ctibridge/ctibridge/sqldb"
	"github.com/ctibridge/ctibridge/upstream"
)

// stores are the phonebook and call history the bridge serves: local (the
// --db database, embedded SQLite by default) or remote (--phonebook-url,
// --history-url: NethCTI-compatible services through pooled, balancing,
// retrying clients).
type stores struct {
	book      *phonebook.Book // nil for a remote phonebook
	names     *numberNames
	phonebook rest.Phonebook
	history   history.Store
	recorder  *history.Recorder   // nil for a remote history or --record-cdr=false
	card      rest.Doer           // nil without --customer-card-url
	gate      *sqldb.Gate         // the --db database; nil when nothing is kept locally
	sessions  auth.SessionStore   // the database with a file fallback, or the file alone
	shared    auth.SharedSessions // the PostgreSQL session table every node shares; nil on SQLite or without a database
	// dbReady, when set before run, is called each time the database
	// becomes ready (serve reads the stored sessions back then).
	dbReady func(ctx context.Context)
	runs    []func(ctx context.Context) error
	closers []func()
}

// run runs the stores' background work (the gate, the phonebook's
// refreshes) until ctx ends. The recorder runs on its own.
func (s *stores) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range s.runs {
		wg.Go(func() { r(ctx) })
	}
	wg.Wait()
}

// status describes the store for /readyz and logs: "up", "down" or
// "starting" (not connected and migrated yet), then the CDRs waiting in
// the spool.
func (s *stores) status() string {
	state := "up"
	switch {
	case s.gate == nil:
		state = "remote"
	case !s.gate.Ready():
		state = "starting (not connected and migrated yet)"
	case !s.gate.Up():
		state = "down"
	}
	if s.recorder != nil {
		st := s.recorder.Stats()
		state += fmt.Sprintf("; cdrs waiting in the spool: %d (%d bytes)", st.Pending, st.SpoolBytes)
	}
	return "store: " + state
}

// openStores opens what c asks for. Close it after everything using it
// has stopped.
//
// users gives the users file in force: users owning an extension have
// their own contacts indexed, so their calls' pop-ups (extenRinging) name
// callers as they know them.
func openStores(ctx context.Context, c *serveConfig, users func() *auth.Users, log *slog.Logger) (_ *stores, err error) {
	s := &stores{names: &numberNames{users: users}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	norm := phonebook.Normalizer{Country: c.phoneCountry, Trunk: c.phoneTrunk, Intl: c.phoneIntl}
	creds, err := upstreamCredentials(c)
	if err != nil {
		return nil, err
	}
	remote := func(urls, name string) (*upstream.Client, error) {
		uc, err := upstream.New(upstream.Config{URLs: splitList(urls), Credentials: creds, Log: log.With("component", "upstream", "service", name)})
		if err != nil {
			return nil, fmt.Errorf("--%s-url: %w", name, err)
		}
		s.closers = append(s.closers, uc.Close)
		return uc, nil
	}

	if c.customerCardURL != "" {
		uc, err := remote(c.customerCardURL, "customer-card")
		if err != nil {
			return nil, err
		}
		s.card = uc
	}

	// The database is opened only when something is kept locally. It
	// need not answer yet: the gate connects and migrates it in the
	// background, with backoff, and the stores answer ErrUnavailable
	// (503) until then; the live state never waits for it.
	if c.phonebookURL == "" || c.historyURL == "" {
		if err := s.openDB(ctx, c, log); err != nil {
			return nil, err
		}
	}

	// Login sessions: in the database, with <data-dir>/sessions.json taking
	// what the database cannot take (down, not migrated yet); in that file
	// alone without a local database.
	if err := os.MkdirAll(c.dataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	file := auth.NewFileSessions(filepath.Join(c.dataDir, "sessions.json"))
	s.sessions = file
	if s.gate != nil {
		s.sessions = auth.Fallback{Primary: authdb.New(s.gate.Conn()), Secondary: file}
		if sqldb.Pool(s.gate.Conn()) != nil {
			s.shared = authdb.New(s.gate.Conn())
		}
	}

	var lookup func(string) string
	if c.phonebookURL != "" {
		uc, err := remote(c.phonebookURL, "phonebook")
		if err != nil {
			return nil, err
		}
		r := phonebook.NewRemote(uc, phonebook.RemoteConfig{Normalizer: norm, Log: log.With("component", "phonebook")})
		s.phonebook, lookup = r, r.Lookup
		s.runs = append(s.runs, r.Run)
	} else {
		book := phonebook.NewBook(phonebook.NewSQL(s.gate.Conn(), norm), phonebook.Config{Normalizer: norm, Owners: s.names.owners,
			Log: log.With("component", "phonebook")})
		s.book, s.phonebook, lookup = book, book, book.Lookup
		s.runs = append(s.runs, book.Run)
	}
	s.names.public, s.names.book = lookup, s.book

	if c.historyURL != "" {
		uc, err := remote(c.historyURL, "history")
		if err != nil {
			return nil, err
		}
		s.history = history.NewRemote(uc, history.RemoteConfig{})
		return s, nil // the remote service keeps its own CDRs
	}
	s.history = history.NewSQL(s.gate.Conn(), history.Config{NameLookup: s.names.name})
	if c.recordCDR {
		s.recorder, err = history.NewRecorder(s.history, history.RecorderConfig{SpoolDir: filepath.Join(c.dataDir, "spool"), Log: log, OnTaken: c.cdrTaken})
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// upstreamCredentials are what the remote services are called with: an
// OAuth2 client's tokens, a static bearer token, or none.
func upstreamCredentials(c *serveConfig) (upstream.Credentials, error) {
	switch {
	case c.upstreamOAuthURL != "":
		return upstream.NewOAuth2(upstream.OAuth2Config{TokenURL: c.upstreamOAuthURL, ClientID: c.upstreamOAuthID,
			ClientSecret: c.upstreamOAuthSecret, Scopes: splitList(c.upstreamOAuthScopes)})
	case c.upstreamToken != "":
		return upstream.StaticHeader("Authorization", "Bearer "+c.upstreamToken), nil
	}
	return nil, nil
}

// openDB opens the local database and its gate, which connects and
// migrates it in the background; once it is ready the phonebook is read
// and s.dbReady runs.
func (s *stores) openDB(ctx context.Context, c *serveConfig, log *slog.Logger) error {
	db, err := sqldb.Open(ctx, c.db, c.dataDir)
	if err != nil {
		return err
	}
	s.closers = append(s.closers, db.Close)
	s.gate = sqldb.NewGate(db.Conn(), sqldb.GateConfig{
		Prepare: func(ctx context.Context) error {
			applied, err := migrate(ctx, db)
			if err == nil {
				log.Info("database ready", "db", db.Desc, "migrations", applied)
			}
			return err
		},
		OnReady: func(ctx context.Context) {
			if s.book != nil {
				s.book.Refresh(ctx) // the caller names, at once
			}
			if s.dbReady != nil {
				s.dbReady(ctx)
			}
		},
		Log: log.With("component", "store", "db", db.Desc),
	})
	s.runs = append(s.runs, s.gate.Run)
	return nil
}

// Lookup names a number from the phonebook without blocking: the engine's
// caller names.
func (s *stores) Lookup(number string) string { return s.phonebook.Lookup(number) }

// numberNames names numbers for the engine and the history: the PBX's
// name of an extension, the rung extension's user's own contacts, the
// public phonebook. Every method is non-blocking and safe from any
// goroutine.
type numberNames struct {
	users  func() *auth.Users
	public func(string) string // the phonebook's public names; nil without one
	book   *phonebook.Book     // own contacts; nil for a remote phonebook
	state  atomic.Pointer[namesState]
}

// namesState is the state whose extensions name numbers: the engine, or
// with --pbx the combined state, where a named PBX's extensions are
// "site2:201" as its CDRs' numbers are (qualifyCDRs).
type namesState struct{ rest.State }

// owners lists the users owning an extension (phonebook.Config.Owners).
func (n *numberNames) owners() []string {
	var out []string
	for _, u := range n.users().All() {
		if len(u.Endpoints) > 0 {
			out = append(out, u.Username)
		}
	}
	return out
}

// name is history's name for a number (cnam without a caller ID name,
// dst_cnam): the extension's name as the PBX (or the users file) gives it,
// else the public phonebook's.
func (n *numberNames) name(num string) string {
	if e := n.state.Load(); e != nil && num != "" {
		if x, ok := e.Snapshot().Extensions.Lookup(num); ok && x.Name != "" {
			return x.Name
		}
	}
	if n.public == nil {
		return ""
	}
	return n.public(num)
}

// ring names the caller of extension exten for its user (the first in the
// users file when several own it): her own contact, else the public one
// (calls.Config.RingLookup).
func (n *numberNames) ring(exten, num string) string {
	if n.book != nil {
		for _, u := range n.users().All() {
			if u.Owns(exten) {
				return n.book.LookupFor(u.Username, num)
			}
		}
	}
	if n.public == nil {
		return ""
	}
	return n.public(num)
}

// Close releases the clients and the database, in reverse order.
func (s *stores) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}
