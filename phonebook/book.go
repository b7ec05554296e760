package phonebook

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctibridge/ctibridge/sqldb"
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
	// OwnTTL is how long a user's own (private and speed-dial) contacts,
	// loaded from the store for a search, serve their next searches. A
	// change made through this Book drops them at once; one made
	// through another replica is seen within OwnTTL. Default 2 s;
	// negative: read them from the store on every search.
	OwnTTL time.Duration
	// Owners returns the users whose own (private and speed-dial)
	// contacts the index keeps for Index.LookupFor: those a call can ring
	// (users owning an extension). Read at each refresh; nil: none. At
	// most maxOwnCached contacts per user are indexed.
	Owners func() []string
	// Log receives refresh failures. Default: discard.
	Log *slog.Logger
}

// Book applies the ownership rules to a Store and keeps its Index fresh.
// Start Run in a goroutine; changes made through the Book refresh the
// index within milliseconds, others within Config.RefreshEvery.
//
// Book also searches the public contacts in memory (see Search), from
// the same refreshed copy.
type Book struct {
	// Immutable after NewBook.
	store Store
	idx   *Index
	cfg   Config
	log   *slog.Logger
	kick  chan struct{}

	// gen counts the changes made through the Book; mem is the public
	// contacts as of mem.gen (nil before the first refresh). Search uses
	// mem only while mem.gen == gen, so a user always reads their own
	// writes, even before the refresh that follows them.
	gen atomic.Uint64
	mem atomic.Pointer[memSearch]

	mu     sync.Mutex // serialises refreshes; guards stamp and owners
	stamp  string
	owners []string // Config.Owners at the last refresh

	ownMu sync.Mutex // guards own
	own   map[string]*ownContacts
}

// maxOwnUsers bounds Book.own; beyond it, expired entries are dropped,
// then all.
const maxOwnUsers = 10000

// NewBook returns a Book over store.
func NewBook(store Store, cfg Config) *Book {
	if cfg.RefreshEvery <= 0 {
		cfg.RefreshEvery = 30 * time.Second
	}
	if cfg.OwnTTL == 0 {
		cfg.OwnTTL = 2 * time.Second
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
	// Read the generation before the data: a change made meanwhile
	// leaves the new snapshot stale, and kicks Run again.
	gen := b.gen.Load()
	st, err := b.store.Stamp(ctx)
	if err != nil {
		return err
	}
	// The stamp alone can miss a change made through the Book in the
	// same millisecond as the previous one; the generation cannot.
	var owners []string
	if b.cfg.Owners != nil {
		owners = b.cfg.Owners()
	}
	if m := b.mem.Load(); st == b.stamp && m != nil && m.gen == gen && slices.Equal(owners, b.owners) {
		return nil
	}
	var cs []Contact
	if err := b.store.Public(ctx, func(c Contact) error { cs = append(cs, c); return nil }); err != nil {
		return err
	}
	if err := b.refreshOwn(ctx, owners); err != nil {
		return err
	}
	b.owners = owners
	b.idx.Set(cs)
	b.mem.Store(newMemSearch(gen, cs, b.cfg.Normalizer))
	b.stamp = st
	return nil
}

// refreshOwn reloads the own contacts of owners (Config.Owners) into the
// index.
func (b *Book) refreshOwn(ctx context.Context, owners []string) error {
	own, ok := b.store.(ownSearcher)
	if !ok {
		return nil
	}
	byUser := map[string][]Contact{}
	for _, u := range owners {
		if u == "" {
			continue
		}
		cs, err := own.listOwn(ctx, u, maxOwnCached)
		if err != nil {
			return err
		}
		byUser[u] = cs
	}
	b.idx.SetPrivate(byUser)
	return nil
}

// LookupFor is Index().LookupFor: user's own contacts first, then the
// public ones; non-blocking.
func (b *Book) LookupFor(user, number string) string { return b.idx.LookupFor(user, number) }

// LookupOwn is Index().LookupOwn: user's own contacts only.
func (b *Book) LookupOwn(user, number string) string { return b.idx.LookupOwn(user, number) }

// Run refreshes the index now, after every change made through the Book,
// and every RefreshEvery, until ctx ends. It returns ctx's error.
func (b *Book) Run(ctx context.Context) error {
	t := time.NewTicker(b.cfg.RefreshEvery)
	defer t.Stop()
	for {
		// An unreachable database is logged by whoever watches it
		// (sqldb.Gate), not every RefreshEvery here.
		if err := b.Refresh(ctx); err != nil && ctx.Err() == nil && !sqldb.IsUnavailable(err) {
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
	b.gen.Add(1)
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

// Search returns the contacts visible to a matching term: the same page
// as Store.Search. Once Refresh has run, and while no change made through
// the Book is waiting for the next one, the public contacts are searched
// in memory and only a's own contacts in the store; a public contact
// changed elsewhere (another replica) is then found by its new content
// within Config.RefreshEvery, as Lookup finds it.
func (b *Book) Search(ctx context.Context, a Actor, term string, limit, offset int) (Page, error) {
	q := Query{Viewer: a.User, Term: term, Limit: limit, Offset: offset}
	m := b.mem.Load()
	own, ok := b.store.(ownSearcher)
	if m == nil || !ok || m.gen != b.gen.Load() {
		return b.store.Search(ctx, q)
	}
	if err := clampQuery(&q); err != nil {
		return Page{}, err
	}
	mine, err := b.ownContacts(ctx, own, m, a.User)
	if err != nil {
		return Page{}, err
	}
	return m.search(ctx, own, mine, b.cfg.Normalizer, q)
}

// ownContacts returns viewer's own contacts for a search on snapshot m:
// cached, or loaded now; nil when the user has too many to keep (search
// them by SQL) or OwnTTL is negative.
func (b *Book) ownContacts(ctx context.Context, own ownSearcher, m *memSearch, viewer string) (*ownContacts, error) {
	if b.cfg.OwnTTL < 0 {
		return nil, nil
	}
	now := time.Now()
	b.ownMu.Lock()
	o := b.own[viewer]
	b.ownMu.Unlock()
	if o != nil && o.mem == m && now.Sub(o.at) < b.cfg.OwnTTL {
		return o, nil
	}
	cs, err := own.listOwn(ctx, viewer, maxOwnCached+1)
	if err != nil {
		return nil, err
	}
	if len(cs) > maxOwnCached {
		return nil, nil
	}
	o = newOwnContacts(m, now, cs, b.cfg.Normalizer)
	b.ownMu.Lock()
	defer b.ownMu.Unlock()
	if b.own == nil || len(b.own) >= maxOwnUsers {
		old := b.own
		b.own = make(map[string]*ownContacts)
		for k, v := range old {
			if v.mem == m && now.Sub(v.at) < b.cfg.OwnTTL && len(b.own) < maxOwnUsers/2 {
				b.own[k] = v
			}
		}
	}
	b.own[viewer] = o
	return o, nil
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
