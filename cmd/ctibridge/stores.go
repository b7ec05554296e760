package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/history"
	"github.com/ctibridge/ctibridge/phonebook"
	"github.com/ctibridge/ctibridge/rest"
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
	sessions  auth.SessionStore // the database with a file fallback, or the file alone
	run       func(ctx context.Context) error
	closers   []func()
}

// openStores opens what c asks for. Close it after everything using it
// has stopped.
func openStores(ctx context.Context, c serveConfig, log *slog.Logger) (_ *stores, err error) {
	s := &stores{}
	var db *storeDB
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

	// Login sessions: in the database when one is open, with
	// <data-dir>/sessions.json taking what the database cannot (down);
	// in that file alone otherwise.
	if err := os.MkdirAll(c.dataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	file := auth.NewFileSessions(filepath.Join(c.dataDir, "sessions.json"))
	s.sessions = file
	defer func() {
		if db != nil && err == nil {
			s.sessions = auth.Fallback{Primary: db.sessionStore(), Secondary: file}
		}
	}()

	// The database is opened only when something is kept locally.
	if c.phonebookURL == "" || c.historyURL == "" {
		if db, err = openDB(ctx, c.db, c.dataDir); err != nil {
			return nil, err
		}
		s.closers = append(s.closers, db.Close)
		applied, err := db.migrate(ctx)
		if err != nil {
			return nil, err
		}
		log.Info("database ready", "db", db.desc, "migrations", applied)
	}

	var lookup func(string) string
	if c.phonebookURL != "" {
		uc, err := remote(c.phonebookURL, "phonebook")
		if err != nil {
			return nil, err
		}
		r := phonebook.NewRemote(uc, phonebook.RemoteConfig{Normalizer: norm, Log: log.With("component", "phonebook")})
		s.phonebook, lookup, s.run = r, r.Lookup, r.Run
	} else {
		book := phonebook.NewBook(db.phonebookStore(norm), phonebook.Config{Normalizer: norm, Log: log.With("component", "phonebook")})
		if err := book.Refresh(ctx); err != nil {
			return nil, err
		}
		s.phonebook, lookup, s.run = book, book.Lookup, book.Run
	}

	if c.historyURL != "" {
		uc, err := remote(c.historyURL, "history")
		if err != nil {
			return nil, err
		}
		s.history = history.NewRemote(uc, history.RemoteConfig{})
		return s, nil // the remote service keeps its own CDRs
	}
	s.history = db.historyStore(history.Config{NameLookup: lookup})
	if c.recordCDR {
		s.recorder, err = history.NewRecorder(s.history, history.RecorderConfig{SpoolDir: filepath.Join(c.dataDir, "spool"), Log: log.With("component", "history")})
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
