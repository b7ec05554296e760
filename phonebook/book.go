package phonebook

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Actor is the user making a request: their user name and whether they
// are an admin.
type Actor struct {
	User  string
	Admin bool
}

// Config configures a Book. The zero value is usable.
type Config struct {
	// Normalizer must be the one the Store was given.
	Normalizer Normalizer
	// RefreshEvery is how often Run checks the store for changes made
	// elsewhere (another replica, an import by SQL). Default 30 s.
	RefreshEvery time.Duration
	// Log receives refresh failures. Default: discard.
	Log *slog.Logger
}

// Book applies the ownership rules to a Store and keeps its Index fresh.
// Start Run in a goroutine; changes made through the Book refresh the
// index within milliseconds, others within Config.RefreshEvery.
type Book struct {
	// Immutable after NewBook.
	store Store
	idx   *Index
	cfg   Config
	log   *slog.Logger
	kick  chan struct{}

	mu    sync.Mutex // serialises refreshes; guards stamp
	stamp string
}

// NewBook returns a Book over store.
func NewBook(store Store, cfg Config) *Book {
	if cfg.RefreshEvery <= 0 {
		cfg.RefreshEvery = 30 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Book{store: store, idx: NewIndex(cfg.Normalizer), cfg: cfg, log: log.With("component", "phonebook"), kick: make(chan struct{}, 1)}
}

// Store returns the underlying store.
func (b *Book) Store() Store { return b.store }

// Index returns the reverse-lookup index.
func (b *Book) Index() *Index { return b.idx }

// Lookup is Index().Lookup: non-blocking, for calls.Config.NameLookup.
func (b *Book) Lookup(number string) string { return b.idx.Lookup(number) }

// Refresh rebuilds the index if the store changed since the last one.
func (b *Book) Refresh(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, err := b.store.Stamp(ctx)
	if err != nil {
		return err
	}
	if st == b.stamp && b.idx.m.Load() != nil {
		return nil
	}
	var cs []Contact
	if err := b.store.Public(ctx, func(c Contact) error { cs = append(cs, c); return nil }); err != nil {
		return err
	}
	b.idx.Set(cs)
	b.stamp = st
	return nil
}

// Run refreshes the index now, after every change made through the Book,
// and every RefreshEvery, until ctx ends. It returns ctx's error.
func (b *Book) Run(ctx context.Context) error {
	t := time.NewTicker(b.cfg.RefreshEvery)
	defer t.Stop()
	for {
		if err := b.Refresh(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("phonebook index refresh failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-b.kick:
		}
	}
}

func (b *Book) changed() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// CanEdit reports whether a may change or delete c: their own private
// and speed-dial contacts; public ones only as admins.
func CanEdit(a Actor, c Contact) bool {
	if c.Type == TypePublic {
		return a.Admin
	}
	return a.User != "" && c.OwnerID == a.User
}

// Search returns the contacts visible to a matching term.
func (b *Book) Search(ctx context.Context, a Actor, term string, limit, offset int) (Page, error) {
	return b.store.Search(ctx, Query{Viewer: a.User, Term: term, Limit: limit, Offset: offset})
}

// LookupContacts returns the contacts visible to a with that number.
func (b *Book) LookupContacts(ctx context.Context, a Actor, number string) ([]Contact, error) {
	return b.store.Lookup(ctx, a.User, number)
}

// Get returns a contact visible to a, or ErrNotFound.
func (b *Book) Get(ctx context.Context, a Actor, id int64) (Contact, error) {
	c, err := b.store.Get(ctx, id)
	if err != nil {
		return Contact{}, err
	}
	if !c.Visible(a.User) {
		return Contact{}, ErrNotFound
	}
	return c, nil
}

// Create stores c owned by a (ErrForbidden for a public contact unless a
// is an admin).
func (b *Book) Create(ctx context.Context, a Actor, c Contact) (Contact, error) {
	if c.Type == "" {
		c.Type = TypePrivate
	}
	c.OwnerID = a.User
	if !CanEdit(a, c) {
		return Contact{}, ErrForbidden
	}
	c, err := b.store.Create(ctx, c)
	if err == nil {
		b.changed()
	}
	return c, err
}

// Modify replaces the contact c.ID with c. The owner never changes; a
// must be allowed to edit both the old and the new contact.
func (b *Book) Modify(ctx context.Context, a Actor, c Contact) (Contact, error) {
	old, err := b.Get(ctx, a, c.ID)
	if err != nil {
		return Contact{}, err
	}
	if c.Type == "" {
		c.Type = old.Type
	}
	c.OwnerID = old.OwnerID
	if !CanEdit(a, old) || !CanEdit(a, c) {
		return Contact{}, ErrForbidden
	}
	if err := b.store.Update(ctx, c); err != nil {
		return Contact{}, err
	}
	b.changed()
	return c, nil
}

// Delete removes a contact a may edit.
func (b *Book) Delete(ctx context.Context, a Actor, id int64) error {
	old, err := b.Get(ctx, a, id)
	if err != nil {
		return err
	}
	if !CanEdit(a, old) {
		return ErrForbidden
	}
	if err := b.store.Delete(ctx, id); err != nil {
		return err
	}
	b.changed()
	return nil
}

// IsInvalid reports whether err is bad input (a 400).
func IsInvalid(err error) bool {
	var ie *InvalidError
	var ce *CSVError
	return errors.As(err, &ie) || errors.As(err, &ce)
}
