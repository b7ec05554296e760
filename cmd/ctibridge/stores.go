package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

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
	phonebook rest.Phonebook
	history   history.Store
	recorder  *history.Recorder // nil for a remote history or --record-cdr=false
	card      rest.Doer         // nil without --customer-card-url
	gate      *sqldb.Gate       // the --db database; nil when nothing is kept locally
	sessions  auth.SessionStore // the database with a file fallback, or the file alone
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
func openStores(ctx context.Context, c serveConfig, log *slog.Logger) (_ *stores, err error) {
	s := &stores{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	norm := phonebook.Normalizer{Country: c.phoneCountry, Trunk: c.phoneTrunk, Intl: c.phoneIntl}
	var creds upstream.Credentials
	switch {
	case c.upstreamOAuthURL != "":
		o, err := upstream.NewOAuth2(upstream.OAuth2Config{TokenURL: c.upstreamOAuthURL, ClientID: c.upstreamOAuthID,
			ClientSecret: c.upstreamOAuthSecret, Scopes: splitList(c.upstreamOAuthScopes)})
		if err != nil {
			return nil, err
		}
		creds = o
	case c.upstreamToken != "":
		creds = upstream.StaticHeader("Authorization", "Bearer "+c.upstreamToken)
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
	var db *storeDB
	var book *phonebook.Book
	if c.phonebookURL == "" || c.historyURL == "" {
		if db, err = openDB(ctx, c.db, c.dataDir); err != nil {
			return nil, err
		}
		s.closers = append(s.closers, db.Close)
		s.gate = sqldb.NewGate(db.conn(), sqldb.GateConfig{
			Prepare: func(ctx context.Context) error {
				applied, err := db.migrate(ctx)
				if err == nil {
					log.Info("database ready", "db", db.desc, "migrations", applied)
				}
				return err
			},
			OnReady: func(ctx context.Context) {
				if book != nil {
					book.Refresh(ctx) // the caller names, at once
				}
				if s.dbReady != nil {
					s.dbReady(ctx)
				}
			},
			Log: log.With("component", "store", "db", db.desc),
		})
		s.runs = append(s.runs, s.gate.Run)
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
		book = phonebook.NewBook(phonebook.NewSQL(s.gate.Conn(), norm), phonebook.Config{Normalizer: norm, Log: log.With("component", "phonebook")})
		s.phonebook, lookup = book, book.Lookup
		s.runs = append(s.runs, book.Run)
	}

	if c.historyURL != "" {
		uc, err := remote(c.historyURL, "history")
		if err != nil {
			return nil, err
		}
		s.history = history.NewRemote(uc, history.RemoteConfig{})
		return s, nil // the remote service keeps its own CDRs
	}
	s.history = history.NewSQL(s.gate.Conn(), history.Config{NameLookup: lookup})
	if c.recordCDR {
		s.recorder, err = history.NewRecorder(s.history, history.RecorderConfig{SpoolDir: filepath.Join(c.dataDir, "spool"), Log: log})
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Lookup names a number from the phonebook without blocking: the engine's
// caller names.
func (s *stores) Lookup(number string) string { return s.phonebook.Lookup(number) }

// Close releases the clients and the database, in reverse order.
func (s *stores) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}
